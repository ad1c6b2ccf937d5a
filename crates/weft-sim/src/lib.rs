//! A deterministic simulator of a Weft cluster.
//!
//! One seed fixes everything: message delays, which node a client talks to, what it writes
//! and reads, when nodes crash, restart and are cut off. The same seed replays the same run,
//! so a failing seed is a reproducible bug.
//!
//! What is production code and what is modelled:
//! * **Production**: every decision a node makes about the agreed cluster state — fencing
//!   when dropped from the members, admission, which topology phase to route by, which
//!   segments to fetch and from whom, when to confirm a phase (and again, when a proposal is
//!   lost), what to drop or merge once stable, whether a cache is DEGRADED — is
//!   `weft_cluster::engine`, the code the server's nodes run; where a request runs, and when
//!   a segment's primary answers a new owner's fetch (`fetch_answer`, the fence that keeps a
//!   transfer from missing a write), is `weft_cluster::placement`; the cluster metadata is `weft_cluster::state::ClusterState`
//!   (members, cache definitions, topologies and their phases, consistent hashes); each
//!   node's data is a `weft_core::Cache`, with versions kept by `apply_remote` and the
//!   persistence seam through which a primary's changes are captured in the order applied.
//! * **Modelled**: the network (per-link FIFO delivery, like one TCP connection, with random
//!   delays; nothing crosses a cut or reaches a crashed node; a crash loses what was in
//!   flight), the clock, failure detection (a node sees the nodes it can reach after a
//!   detection delay), consensus (a leader that reaches a majority of the members commits
//!   commands in one total order and ships the log to the others; a minority commits
//!   nothing) — the server uses foca and openraft for these, tested on their own — and the
//!   IO that carries out the engine's effects: a transfer's fetches, a primary's replication
//!   to its backups and its acknowledgements (a backup applies changes only from the primary
//!   of its own topology; refused ones are sent again while the sender still orders them;
//!   a primary takes no write of a segment it hands over — `SegmentRoute::orders`, the
//!   production rule — and confirms ReadAllWriteAll once what it ordered is acknowledged, as
//!   the server's `Node::drain_for_handover` does), and the read barrier (a primary answers a read once the writes in flight on its segment
//!   when it ran are on every owner).
//!
//! A run has a **safety phase** (client writes and reads — several at once, to a few keys
//! written over and over and to fresh ones — while faults happen: crashes, restarts within
//! failure detection, partitions, and graceful leaves, where the node is released at once
//! and exits a moment later, either draining as the server's `Node::leave` does or frozen
//! on the route it had, still ordering writes; at most `owners − 1` nodes away at a time,
//! the next fault only once the topology is stable again) and a **liveness phase** (every fault healed). Afterwards the checkers
//! require that every live node installed the same stable topology, every segment has its
//! full owner count, every acknowledged write is what each owner of its key holds (or a
//! write applied after it, at a higher version, whose answer never came), and every key's history of writes and
//! reads is linearizable ([`linearizable`]), as a synchronous cache that denies reads and
//! writes while DEGRADED promises.

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use weft_cluster::engine::{self, Effect, Engine};
use weft_cluster::placement::{self, CacheRoute};
use weft_cluster::state::{ClusterState, Command, NodeRecord};
use weft_cluster::topology::Phase;
use weft_cluster::wire::EntryImage;
use weft_cluster::{ConsistentHash, Location, MemberId, Mode};
use weft_core::persistence::BoxFuture;

pub mod linearizable;
use weft_core::{
    Cache, CacheConfig, CacheEntry, CacheManager, CacheMode, ListenerOptions, ManagerConfig,
    ManualClock, Persistence, PersistenceError, PersistenceFactory, PersistenceStats, RemoteChange,
    StoreChange, WriteOptions,
};

/// The one clustered cache every run uses.
pub const CACHE: &str = "sim";

/// What a run does.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The seed everything derives from.
    pub seed: u64,
    /// Nodes.
    pub nodes: usize,
    /// Copies per segment.
    pub owners: usize,
    /// Segments.
    pub segments: u32,
    /// Keys clients use.
    pub keys: u32,
    /// Simulated milliseconds of the safety phase (faults on).
    pub safety_ms: u64,
    /// Simulated milliseconds of the liveness phase (faults healed).
    pub liveness_ms: u64,
}

impl Options {
    /// A small, busy cluster: 4 nodes, 2 owners, 16 segments, 40 keys.
    #[must_use]
    pub fn with_seed(seed: u64) -> Self {
        Self {
            seed,
            nodes: 4,
            owners: 2,
            segments: 16,
            keys: 40,
            safety_ms: 6_000,
            liveness_ms: 6_000,
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Writes acknowledged to clients.
    pub acknowledged: u64,
    /// Writes whose answer never came (may or may not have happened).
    pub unanswered: u64,
    /// Reads answered.
    pub reads: u64,
    /// Reads whose answer never came (refused, or lost with a node).
    pub unanswered_reads: u64,
    /// Crashes injected.
    pub crashes: u64,
    /// Of those, processes restarted at once (well within failure detection).
    pub quick_restarts: u64,
    /// Partitions injected.
    pub partitions: u64,
    /// Graceful leaves injected (the node is released, then stops; it restarts later).
    pub leaves: u64,
    /// Topologies the cluster went through.
    pub topologies: u32,
}

// ---- the persistence seam: what a node's cache changed, in order ---------------------------

thread_local! {
    static APPLYING_REMOTE: Cell<bool> = const { Cell::new(false) };
}

fn applying_remote<R>(f: impl FnOnce() -> R) -> R {
    APPLYING_REMOTE.with(|flag| flag.set(true));
    let result = f();
    APPLYING_REMOTE.with(|flag| flag.set(false));
    result
}

type Outbox = Arc<Mutex<Vec<(u32, Vec<u8>, Option<EntryImage>)>>>;

#[derive(Debug)]
struct Recorder {
    outbox: Outbox,
}

impl Persistence for Recorder {
    fn admit_write(&self) -> Result<(), PersistenceError> {
        Ok(())
    }
    fn record(&self, segment: u32, change: StoreChange<'_>) {
        if APPLYING_REMOTE.with(Cell::get) {
            return;
        }
        let change = match change {
            StoreChange::Put(entry) => (segment, entry.key().to_vec(), Some(EntryImage::of(entry))),
            StoreChange::Remove(key) => (segment, key.to_vec(), None),
        };
        self.outbox.lock().push(change);
    }
    fn forget(&self, _: u32, _: &[u8]) {}
    fn evicted(&self, _: u32, _: &CacheEntry) {}
    fn activated(&self, _: u32, _: &[u8]) {}
    fn preload(&self) -> bool {
        false
    }
    fn load(&self, _: u32, _: &[u8]) -> Result<Option<CacheEntry>, PersistenceError> {
        Ok(None)
    }
    fn memory_complete(&self) -> bool {
        true
    }
    fn wait(&self) -> Result<(), PersistenceError> {
        Ok(())
    }
    fn wait_async(&self) -> BoxFuture<Result<(), PersistenceError>> {
        Box::pin(std::future::ready(Ok(())))
    }
    fn clear(&self) -> Result<(), PersistenceError> {
        Ok(())
    }
    fn for_each(&self, _: &[u32], _: &mut dyn FnMut(CacheEntry)) -> Result<(), PersistenceError> {
        Ok(())
    }
    fn size(&self, in_memory: usize) -> Option<usize> {
        Some(in_memory)
    }
    fn max_version(&self) -> u64 {
        0
    }
    fn stats(&self) -> PersistenceStats {
        PersistenceStats::default()
    }
    fn preloaded(&self, _: u64, _: u64) {}
    fn shutdown(&self, _: &mut dyn Iterator<Item = CacheEntry>) -> Result<(), PersistenceError> {
        Ok(())
    }
    fn destroy(&self) {}
}

#[derive(Debug)]
struct RecorderFactory {
    outbox: Outbox,
}

impl PersistenceFactory for RecorderFactory {
    fn open(&self, _: &str, _: &CacheConfig) -> Result<Option<Arc<dyn Persistence>>, String> {
        Ok(Some(Arc::new(Recorder {
            outbox: Arc::clone(&self.outbox),
        })))
    }
}

// ---- messages -------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Msg {
    /// The leader's log from `from` on.
    Append { from: usize, entries: Vec<Command> },
    /// A command for the leader to commit.
    Propose(Command),
    /// A client write forwarded to the primary.
    Write {
        op: u64,
        key: Vec<u8>,
        value: Vec<u8>,
        client: usize,
    },
    /// The primary's changes, in order.
    Replicate {
        op: u64,
        changes: Vec<(u32, Vec<u8>, Option<EntryImage>)>,
    },
    /// A backup applied `op`'s changes.
    Ack { op: u64 },
    /// A write's outcome for the client's node.
    Done { op: u64 },
    /// A client read sent to the member its node routes it to.
    Read {
        op: u64,
        key: Vec<u8>,
        client: usize,
    },
    /// A read's answer: the value the key held (`None`: nothing).
    ReadDone { op: u64, value: Option<u64> },
    /// A segment, for state transfer.
    Fetch { segment: u32, rebalance: u32 },
    /// The segment's entries.
    Entries {
        segment: u32,
        rebalance: u32,
        entries: Vec<EntryImage>,
    },
}

#[derive(Debug)]
enum Event {
    Deliver {
        from: usize,
        to: usize,
        incarnation: (u64, u64),
        msg: Msg,
    },
    Tick,
    /// A leaving node's process exits (its incarnation, so that a later one is not; a
    /// draining one waits, up to `deadline`, to be out of the agreed state it applied).
    Exit {
        node: usize,
        incarnation: u64,
        deadline: u64,
    },
}

/// How a node leaves gracefully.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leaving {
    /// As the server's `Node::leave` does: it orders no write any more, and follows the
    /// agreed state until it is out.
    Draining,
    /// As it did before that: it stops following the agreed state the moment it asks to
    /// leave, and goes on answering with the route it had — ordering writes as a primary
    /// others no longer know — until the process exits. The fence on state transfer must
    /// keep this from losing a write too.
    Frozen,
}

// ---- nodes ----------------------------------------------------------------------------------

struct Node {
    name: String,
    incarnation: u64,
    raft_id: u64,
    up: bool,
    manager: CacheManager,
    outbox: Outbox,
    /// The metadata log applied so far.
    log_len: usize,
    state: ClusterState,
    /// The production decisions about each agreed state (`weft_cluster::engine`).
    engine: Engine,
    /// The route the engine last installed, and its topology's id and phase.
    route: Option<CacheRoute>,
    installed: Option<(u32, Phase)>,
    /// Segments being fetched → keys replication changed meanwhile.
    touched: HashMap<u32, HashSet<Vec<u8>>>,
    /// Segments being fetched → the members that hold them, and fetches sent so far.
    fetching: BTreeMap<u32, (Vec<MemberId>, usize)>,
    fetch_rebalance: Option<u32>,
    /// Writes this node ordered as primary: op → who is waiting, the segment, and the
    /// backups still to acknowledge.
    waiting: BTreeMap<u64, Waiting>,
    /// Reads that saw writes still in flight: answered once those are on every owner.
    parked: Vec<ParkedRead>,
    /// Nodes this node's failure detector considers up, and since when it changed.
    view: BTreeSet<usize>,
    /// DEGRADED: cut off from the majority of its topology (refuses reads and writes, as
    /// the server's DENY_READ_WRITES does), until a majority member confirms its topology.
    degraded: bool,
    /// Leaving the cluster gracefully, and how.
    leaving: Option<Leaving>,
    /// Confirmations of ReadAllWriteAll held until the writes this node ordered before
    /// them are acknowledged (the server's `Node::drain_for_handover`), at most
    /// [`HANDOVER_MAX_MS`] from the time held.
    handover: Vec<(Command, BTreeSet<u64>, u64)>,
}

/// A write a primary applied, waiting for its backups.
#[derive(Debug, Clone)]
struct Waiting {
    client: usize,
    segment: u32,
    backups: BTreeSet<usize>,
}

/// A read a primary answered from its memory, held until the writes in flight on its
/// segment when it ran are on every owner (the server's read barrier).
#[derive(Debug, Clone)]
struct ParkedRead {
    op: u64,
    client: usize,
    value: Option<u64>,
    owed: BTreeSet<u64>,
}

/// What the engine may ask of a simulated node: its one cache always exists, and a node
/// starts empty (no stores), so it never holds entries when it is first admitted.
struct SimLocal;

impl engine::Local for SimLocal {
    fn has_cache(&self, cache: &str) -> bool {
        cache == CACHE
    }
    fn holds_entries(&self, _: &str) -> bool {
        false
    }
}

impl Node {
    fn cache(&self) -> Cache {
        match self.manager.cache(CACHE) {
            Some(cache) => cache,
            None => unreachable_cache(),
        }
    }
}

fn unreachable_cache() -> ! {
    panic!("the simulated cache exists on every node")
}

/// A write a client is waiting for.
#[derive(Debug, Clone)]
struct Pending {
    key: Vec<u8>,
    value: u64,
    issued_ms: u64,
    /// When it was issued, in history steps.
    invoked: u64,
}

/// An event a node's listener saw: the node, its incarnation, the key, the entry's version
/// and value.
type Raised = (usize, u64, Vec<u8>, u64, Option<u64>);

/// A read a client is waiting for.
#[derive(Debug, Clone)]
struct PendingRead {
    key: Vec<u8>,
    issued_ms: u64,
    invoked: u64,
}

/// What the auditor knows about one key (values are unique per write).
#[derive(Debug, Clone, Default)]
struct History {
    acked: Option<u64>,
    /// The version the acknowledged value was applied at (see `Sim::versions`).
    acked_version: u64,
    /// Values written after the last acknowledged one whose answer never came.
    unknown: BTreeSet<u64>,
}

/// The simulated cluster.
pub struct Sim {
    options: Options,
    rng: u64,
    now: u64,
    clock: ManualClock,
    seq: u64,
    queue: BinaryHeap<Reverse<(u64, u64)>>,
    events: HashMap<u64, Event>,
    nodes: Vec<Node>,
    /// Pairs of nodes that cannot talk.
    cut: BTreeSet<(usize, usize)>,
    /// The last delivery time per link (FIFO, like one TCP connection).
    link_clock: HashMap<(usize, usize), u64>,
    /// The committed metadata log and the state it gives.
    log: Vec<Command>,
    committed: ClusterState,
    pending: BTreeMap<u64, Pending>,
    reads: BTreeMap<u64, PendingRead>,
    histories: BTreeMap<Vec<u8>, History>,
    /// The version each written value was applied at by the primary that ordered it.
    versions: HashMap<u64, u64>,
    /// Every client operation per key, for the linearizability checker; timestamps are
    /// history steps (one per invocation or answer), so no two events tie.
    ops: BTreeMap<Vec<u8>, Vec<linearizable::Op>>,
    steps: u64,
    /// What every node's listener saw, in the order raised.
    raised: Arc<Mutex<Vec<Raised>>>,
    next_op: u64,
    next_value: u64,
    stats: Stats,
    faults_on: bool,
    /// When the current fault heals.
    heal_at: Option<u64>,
    /// Processes released from the members as they left (node, incarnation): the leader
    /// does not take them back, though they may still answer for a moment.
    departed: BTreeSet<(usize, u64)>,
    trace: Vec<String>,
    last_leader: Cell<Option<usize>>,
    /// `WEFT_SIM_TRACE_KEY`, read once.
    trace_key: Option<Vec<u8>>,
}

impl std::fmt::Debug for Sim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim")
            .field("seed", &self.options.seed)
            .field("now_ms", &self.now)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// A failed run: what went wrong, and the last things that happened.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The seed that reproduces it.
    pub seed: u64,
    /// What a checker found.
    pub reason: String,
    /// The last events, oldest first.
    pub trace: Vec<String>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "seed {}: {}", self.seed, self.reason)?;
        for line in &self.trace {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}

/// The longest a primary holds its confirmation of ReadAllWriteAll for its backups (the
/// server's `HANDOVER_DRAIN_MAX`).
const HANDOVER_MAX_MS: u64 = 5_000;
const TICK_MS: u64 = 10;
const DETECTION_MS: u64 = 300;
const CLIENT_TIMEOUT_MS: u64 = 2_000;
/// Client operations started per tick while clients run: several at once, so that writes
/// to one key from different clients race, and writes land in the few milliseconds between
/// two members installing the same topology.
const CLIENT_OPS_PER_TICK: usize = 3;
/// How long a draining node follows the agreed state, at most, before its process exits.
const LEAVE_FOLLOW_MS: u64 = 1_000;

fn addr(i: usize) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, u8::try_from(i + 1).unwrap_or(255)], 7800))
}

impl Sim {
    /// A cluster of `options.nodes` nodes, none started.
    #[must_use]
    pub fn new(options: Options) -> Self {
        let clock = ManualClock::new(1_700_000_000_000);
        let mut sim = Self {
            options,
            rng: options.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
            now: 0,
            clock,
            seq: 0,
            queue: BinaryHeap::new(),
            events: HashMap::new(),
            nodes: Vec::new(),
            cut: BTreeSet::new(),
            link_clock: HashMap::new(),
            log: Vec::new(),
            committed: ClusterState::default(),
            pending: BTreeMap::new(),
            reads: BTreeMap::new(),
            histories: BTreeMap::new(),
            versions: HashMap::new(),
            ops: BTreeMap::new(),
            steps: 0,
            raised: Arc::default(),
            next_op: 1,
            next_value: 1,
            stats: Stats::default(),
            faults_on: true,
            heal_at: None,
            departed: BTreeSet::new(),
            trace: Vec::new(),
            last_leader: Cell::new(None),
            trace_key: std::env::var("WEFT_SIM_TRACE_KEY")
                .ok()
                .map(String::into_bytes),
        };
        for i in 0..options.nodes {
            let node = sim.fresh_node(i, 1);
            sim.nodes.push(node);
        }
        sim
    }

    fn fresh_node(&mut self, i: usize, incarnation: u64) -> Node {
        let outbox: Outbox = Arc::default();
        let config = CacheConfig {
            mode: CacheMode::Distributed,
            owners: u32::try_from(self.options.owners).unwrap_or(2),
            segments: self.options.segments,
            ..CacheConfig::default()
        };
        let mut caches = BTreeMap::new();
        caches.insert(CACHE.to_owned(), config);
        let manager = CacheManager::with_persistence(
            ManagerConfig { caches },
            Arc::new(self.clock.clone()),
            Some(Arc::new(RecorderFactory {
                outbox: Arc::clone(&outbox),
            })),
        )
        .unwrap_or_else(|error| panic!("simulated caches: {error}"));
        // A listener on every node, as an application registers one: it sees the events of
        // the writes this node applies as primary (backups and transfers raise none).
        let raised = Arc::clone(&self.raised);
        if let Some(cache) = manager.cache(CACHE) {
            cache.add_listener(
                ListenerOptions {
                    local_only: true,
                    ..ListenerOptions::default()
                },
                move |event| {
                    let value = event.new_entry().and_then(|entry| {
                        std::str::from_utf8(entry.value())
                            .ok()
                            .and_then(|t| t.parse::<u64>().ok())
                    });
                    let version = event.new_entry().map_or(0, CacheEntry::version);
                    raised
                        .lock()
                        .push((i, incarnation, event.key().to_vec(), version, value));
                },
            );
        }
        Node {
            name: format!("n{i}"),
            incarnation,
            raft_id: (i as u64) << 32 | incarnation,
            up: true,
            manager,
            outbox,
            log_len: 0,
            state: ClusterState::default(),
            engine: Engine::new(MemberId(format!("n{i}")), (i as u64) << 32 | incarnation),
            route: None,
            installed: None,
            touched: HashMap::new(),
            fetching: BTreeMap::new(),
            fetch_rebalance: None,
            waiting: BTreeMap::new(),
            parked: Vec::new(),
            view: BTreeSet::new(),
            degraded: false,
            leaving: None,
            handover: Vec::new(),
        }
    }

    fn random(&mut self, below: u64) -> u64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) % below.max(1)
    }

    fn note(&mut self, line: String) {
        self.trace.push(format!("{:>6}ms {line}", self.now));
        if self.trace.len() > 200 {
            self.trace.remove(0);
        }
    }

    /// Notes what happens to one key, when `WEFT_SIM_TRACE_KEY` names it.
    fn note_key(&mut self, key: &[u8], line: impl FnOnce() -> String) {
        if self.trace_key.as_deref() == Some(key) {
            let line = line();
            self.note(line);
        }
    }

    fn schedule(&mut self, at: u64, event: Event) {
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq)));
        self.events.insert(self.seq, event);
    }

    fn reachable(&self, a: usize, b: usize) -> bool {
        a == b
            || (self.nodes[a].up && self.nodes[b].up && !self.cut.contains(&(a.min(b), a.max(b))))
    }

    fn send(&mut self, from: usize, to: usize, msg: Msg) {
        if !self.reachable(from, to) {
            return;
        }
        let delay = 1 + self.random(8);
        let earliest = self.now + delay;
        let at = earliest.max(self.link_clock.get(&(from, to)).copied().unwrap_or(0));
        self.link_clock.insert((from, to), at);
        let incarnation = (self.nodes[from].incarnation, self.nodes[to].incarnation);
        self.schedule(
            at,
            Event::Deliver {
                from,
                to,
                incarnation,
                msg,
            },
        );
    }

    fn record(&self, i: usize) -> NodeRecord {
        NodeRecord {
            name: self.nodes[i].name.clone(),
            raft_id: self.nodes[i].raft_id,
            cluster_addr: addr(i),
            endpoint: addr(i),
            location: Location::default(),
        }
    }

    // ---- consensus (modelled) ----------------------------------------------------------

    /// The leader: the previous one while it still qualifies, else the first that does.
    /// A node qualifies when it is an agreed member (under its current consensus id) and its
    /// failure detector sees a strict majority of the agreed members — as a Raft leader needs
    /// a majority of votes, and a freshly started node has seen nobody yet.
    fn leader(&self) -> Option<usize> {
        if self.committed.nodes().is_empty() {
            return self.nodes[0].up.then_some(0);
        }
        let qualifies = |candidate: usize| {
            let node = &self.nodes[candidate];
            node.up
                && self
                    .committed
                    .node(&node.name)
                    .is_some_and(|record| record.raft_id == node.raft_id)
                && {
                    let seen = self
                        .committed
                        .nodes()
                        .values()
                        .filter(|record| {
                            self.nodes
                                .iter()
                                .position(|n| n.name == record.name && n.raft_id == record.raft_id)
                                .is_some_and(|j| {
                                    j == candidate
                                        || (node.view.contains(&j) && self.reachable(candidate, j))
                                })
                        })
                        .count();
                    seen * 2 > self.committed.nodes().len()
                }
        };
        if let Some(previous) = self.last_leader.get()
            && qualifies(previous)
        {
            return Some(previous);
        }
        let chosen = (0..self.nodes.len()).find(|&candidate| qualifies(candidate));
        self.last_leader.set(chosen);
        chosen
    }

    fn commit(&mut self, command: Command) {
        let mut state = self.committed.clone();
        if state.apply(command.clone()).is_ok() {
            self.committed = state;
        }
        self.log.push(command);
    }

    fn lead(&mut self) {
        let Some(leader) = self.leader() else {
            return;
        };
        // Members: the nodes the leader's detector sees up (itself included).
        let departed = |i: usize| self.departed.contains(&(i, self.nodes[i].incarnation));
        let mut live: Vec<NodeRecord> = self.nodes[leader]
            .view
            .iter()
            .filter(|&&i| !departed(i))
            .map(|&i| self.record(i))
            .collect();
        if !self.nodes[leader].view.contains(&leader) && !departed(leader) {
            live.push(self.record(leader));
        }
        let same = live.len() == self.committed.nodes().len()
            && live
                .iter()
                .all(|record| self.committed.node(&record.name) == Some(record));
        if !same {
            let names: Vec<&str> = live.iter().map(|r| r.name.as_str()).collect();
            self.note(format!("leader n{leader} commits members {names:?}"));
            self.commit(Command::Members(live));
        }
        if self.committed.cache(CACHE).is_none() && !self.committed.nodes().is_empty() {
            self.commit(Command::DefineCache {
                name: CACHE.to_owned(),
                config: "{}".to_owned(),
                mode: Mode::Distributed {
                    owners: self.options.owners,
                },
                segments: self.options.segments,
            });
        }
        // Ship the log to every node the leader reaches.
        for to in 0..self.nodes.len() {
            if to == leader {
                self.deliver_log(leader);
                continue;
            }
            let from = self.nodes[to].log_len.min(self.log.len());
            if from < self.log.len() {
                let entries = self.log[from..].to_vec();
                self.send(leader, to, Msg::Append { from, entries });
            }
        }
    }

    fn deliver_log(&mut self, i: usize) {
        let from = self.nodes[i].log_len;
        if from < self.log.len() {
            let entries = self.log[from..].to_vec();
            self.on_append(i, from, entries);
        }
    }

    // ---- a node applying the agreed state ----------------------------------------------

    fn on_append(&mut self, i: usize, from: usize, entries: Vec<Command>) {
        if from != self.nodes[i].log_len || self.nodes[i].leaving == Some(Leaving::Frozen) {
            return;
        }
        for command in entries {
            let _ = self.nodes[i].state.apply(command);
            self.nodes[i].log_len += 1;
        }
        self.install(i);
    }

    /// Carries out what the production engine decides about node `i`'s newly agreed state.
    fn install(&mut self, i: usize) {
        let state = self.nodes[i].state.clone();
        let now = self.now;
        let effects = self.nodes[i].engine.on_state(&state, now, &SimLocal);
        self.carry_out(i, effects);
        // Backups that left the agreed members no longer hold writes back.
        let waiting: Vec<u64> = self.nodes[i].waiting.keys().copied().collect();
        for op in waiting {
            self.settle(i, op);
        }
    }

    /// Does what node `i`'s engine decided, as the server's node does it.
    fn carry_out(&mut self, i: usize, effects: Vec<Effect>) {
        let me = MemberId(self.nodes[i].name.clone());
        for effect in effects {
            match effect {
                Effect::Fence => {
                    let dropped = self.nodes[i].waiting.len();
                    self.nodes[i].waiting.clear();
                    self.nodes[i].parked.clear();
                    self.note(format!(
                        "n{i} was dropped from the members; {dropped} writes in flight fail"
                    ));
                }
                // The simulator's links name nodes by index, and its one cache exists on
                // every node from the start.
                Effect::Members | Effect::Create { .. } | Effect::Remove { .. } => {}
                Effect::Available { .. } => self.nodes[i].degraded = false,
                Effect::Discard { .. } => {
                    let all: Vec<u32> = (0..self.options.segments).collect();
                    self.nodes[i].cache().drop_segments(&all);
                }
                Effect::Route {
                    topology,
                    exclude_me,
                    ..
                } => {
                    self.nodes[i].installed = Some((topology.id(), topology.phase()));
                    let mut route = CacheRoute::new(topology);
                    if exclude_me {
                        route.exclude(&me);
                    }
                    self.nodes[i].route = Some(route);
                }
                Effect::Transfer {
                    rebalance,
                    segments,
                    ..
                } => self.start_transfer(i, rebalance, segments),
                Effect::Propose(
                    command @ Command::Confirm {
                        phase: Phase::ReadAllWriteAll,
                        ..
                    },
                ) => {
                    // The primaries change at the next phase: what this node ordered must be
                    // on every owner first, as the server drains before confirming.
                    let owed: BTreeSet<u64> = self.nodes[i].waiting.keys().copied().collect();
                    let now = self.now;
                    self.nodes[i].handover.push((command, owed, now));
                    self.release_handover(i);
                }
                Effect::Propose(command) => self.propose(i, command),
                // The simulated caches deny reads and writes while DEGRADED, so the side that
                // was cut off took no writes of its own: merging by policy keeps the other
                // side's entries, and what remains is dropping the segments not owned.
                Effect::Merge { hash, .. } | Effect::DropUnowned { hash, .. } => {
                    self.drop_unowned(i, &hash);
                }
            }
        }
    }

    fn drop_unowned(&mut self, i: usize, hash: &ConsistentHash) {
        let me = MemberId(self.nodes[i].name.clone());
        let unowned: Vec<u32> = (0..hash.segment_count())
            .filter(|&s| !hash.owner_ids(s).contains(&&me))
            .filter_map(|s| u32::try_from(s).ok())
            .collect();
        self.nodes[i].cache().drop_segments(&unowned);
        let installed = self.nodes[i].installed;
        self.note(format!(
            "n{i} drops {} segments at {installed:?}",
            unowned.len()
        ));
    }

    /// Starts fetching what a rebalance hands node `i` (a transfer of an older rebalance
    /// ends unfinished, as the server's does when its routing moves on).
    fn start_transfer(&mut self, i: usize, rebalance: u32, segments: engine::Sources) {
        if let Some(old) = self.nodes[i].fetch_rebalance.take()
            && old != rebalance
        {
            let now = self.now;
            let _ = self.nodes[i]
                .engine
                .transfer_finished(CACHE, old, false, now);
        }
        self.nodes[i].fetch_rebalance = Some(rebalance);
        self.nodes[i].fetching.clear();
        self.nodes[i].touched.clear();
        for (segment, sources) in segments {
            // Without a source every copy is gone: the segment starts empty.
            if sources.is_empty() {
                continue;
            }
            self.nodes[i].fetching.insert(segment, (sources, 0));
            self.nodes[i].touched.insert(segment, HashSet::new());
        }
        self.fetch_missing(i);
        self.transfer_progress(i);
    }

    /// Asks for each segment still missing, from its next source in turn (the server tries
    /// the owners one after the other).
    fn fetch_missing(&mut self, i: usize) {
        let Some(rebalance) = self.nodes[i].fetch_rebalance else {
            return;
        };
        let asks: Vec<(u32, MemberId)> = self.nodes[i]
            .fetching
            .iter_mut()
            .filter_map(|(&segment, (sources, sent))| {
                let source = sources.get(*sent % sources.len().max(1))?.clone();
                *sent += 1;
                Some((segment, source))
            })
            .collect();
        for (segment, source) in asks {
            if let Some(source) = self.index_of(&source.0) {
                self.send(i, source, Msg::Fetch { segment, rebalance });
            }
        }
    }

    /// Tells node `i`'s engine once its transfer has every segment.
    fn transfer_progress(&mut self, i: usize) {
        let Some(rebalance) = self.nodes[i].fetch_rebalance else {
            return;
        };
        if !self.nodes[i].fetching.is_empty() {
            return;
        }
        self.nodes[i].fetch_rebalance = None;
        let now = self.now;
        let effects = self.nodes[i]
            .engine
            .transfer_finished(CACHE, rebalance, true, now);
        self.carry_out(i, effects);
    }

    fn index_of(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|node| node.name == name)
    }

    /// As the server's coordination tick: the engine keeps the rebalances node `i` takes
    /// part in moving, and segments whose fetch was lost are asked for again.
    fn retry(&mut self, i: usize) {
        let state = self.nodes[i].state.clone();
        let now = self.now;
        let effects = self.nodes[i].engine.on_tick(&state, now);
        self.carry_out(i, effects);
        self.fetch_missing(i);
        self.release_handover(i);
    }

    /// Proposes the held confirmations whose writes are all settled (acknowledged, or
    /// failed), or that waited [`HANDOVER_MAX_MS`] (a backup that never answers, as the
    /// server's drain is bounded).
    fn release_handover(&mut self, i: usize) {
        let waiting: BTreeSet<u64> = self.nodes[i].waiting.keys().copied().collect();
        let now = self.now;
        let mut ready = Vec::new();
        self.nodes[i].handover.retain_mut(|(command, owed, since)| {
            owed.retain(|op| waiting.contains(op));
            if owed.is_empty() || now.saturating_sub(*since) >= HANDOVER_MAX_MS {
                ready.push(command.clone());
                false
            } else {
                true
            }
        });
        for command in ready {
            self.propose(i, command);
        }
    }

    fn propose(&mut self, i: usize, command: Command) {
        // Without a reachable leader the proposal is lost; the engine proposes again.
        match self.leader() {
            Some(leader) if leader == i => self.commit(command),
            Some(leader) => self.send(i, leader, Msg::Propose(command)),
            None => {}
        }
    }

    // ---- the data path -----------------------------------------------------------------

    /// Where node `i` runs a request on `key`, by the server's placement over the route
    /// its engine installed; `None` when it refuses (DEGRADED, or no route yet).
    fn route(&self, i: usize, key: &[u8], write: bool) -> Option<usize> {
        if self.nodes[i].degraded {
            return None;
        }
        let route = self.nodes[i].route.as_ref()?;
        let segment = self.nodes[i].cache().segment_of(key);
        let me = MemberId(self.nodes[i].name.clone());
        let member = match placement::place(route, &me, segment, !write) {
            Some(member) => self.index_of(&member.0)?,
            None => i,
        };
        if write && member == i && self.nodes[i].leaving == Some(Leaving::Draining) {
            // As `Replicator::admit_write_at` refuses while leaving: no write ordered here.
            return None;
        }
        if write
            && member == i
            && !route
                .segment(segment)
                .is_some_and(|owners| owners.orders(&me))
        {
            // As `Replicator::admit_write_at` refuses a segment its primary hands over
            // (`SegmentRoute::orders`).
            return None;
        }
        Some(member)
    }

    fn step_now(&mut self) -> u64 {
        self.steps += 1;
        self.steps
    }

    fn client_op(&mut self) {
        let live: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].up)
            .collect();
        if live.is_empty() {
            return;
        }
        let client = live[self.random(live.len() as u64) as usize];
        let op = self.next_op;
        // Mostly a few keys written over and over (lost updates, stale reads), and one
        // write in four to a key never written before: a loss there is not hidden by a
        // later overwrite, so the auditor sees it at the end.
        let key = if self.random(4) == 0 {
            format!("fresh{op}")
        } else {
            format!("k{}", self.random(u64::from(self.options.keys)))
        }
        .into_bytes();
        self.next_op += 1;
        let invoked = self.step_now();
        if self.random(3) == 0 {
            self.reads.insert(
                op,
                PendingRead {
                    key: key.clone(),
                    issued_ms: self.now,
                    invoked,
                },
            );
            let Some(owner) = self.route(client, &key, false) else {
                return;
            };
            let msg = Msg::Read { op, key, client };
            if owner == client {
                self.on_read(client, msg);
            } else {
                self.send(client, owner, msg);
            }
            return;
        }
        let value = self.next_value;
        self.next_value += 1;
        self.pending.insert(
            op,
            Pending {
                key: key.clone(),
                value,
                issued_ms: self.now,
                invoked,
            },
        );
        self.histories.entry(key.clone()).or_default();
        let Some(primary) = self.route(client, &key, true) else {
            return;
        };
        let msg = Msg::Write {
            op,
            key,
            value: value.to_string().into_bytes(),
            client,
        };
        if primary == client {
            self.on_write(client, msg);
        } else {
            self.send(client, primary, msg);
        }
    }

    /// A read at the member node `i` routed it to: answered from memory if this node runs
    /// it (else dropped: the client times out), once the writes in flight on its segment
    /// are on every owner.
    fn on_read(&mut self, i: usize, msg: Msg) {
        let Msg::Read { op, key, client } = msg else {
            return;
        };
        if self.route(i, &key, false) != Some(i) {
            return;
        }
        let cache = self.nodes[i].cache();
        let value = cache.get(&key).ok().flatten().and_then(|v| {
            std::str::from_utf8(&v)
                .ok()
                .and_then(|t| t.parse::<u64>().ok())
        });
        let segment = cache.segment_of(&key);
        let owed: BTreeSet<u64> = self.nodes[i]
            .waiting
            .iter()
            .filter(|(_, w)| w.segment == segment)
            .map(|(op, _)| *op)
            .collect();
        self.note_key(&key, || {
            format!("n{i} reads {value:?} op{op}, owed {owed:?}")
        });
        let read = ParkedRead {
            op,
            client,
            value,
            owed,
        };
        if read.owed.is_empty() {
            self.answer_read(i, &read);
        } else {
            self.nodes[i].parked.push(read);
        }
    }

    fn answer_read(&mut self, i: usize, read: &ParkedRead) {
        let msg = Msg::ReadDone {
            op: read.op,
            value: read.value,
        };
        if read.client == i {
            self.on_read_done(read.op, read.value);
        } else {
            self.send(i, read.client, msg);
        }
    }

    fn on_read_done(&mut self, op: u64, value: Option<u64>) {
        let Some(read) = self.reads.remove(&op) else {
            return;
        };
        let completed = self.step_now();
        self.ops
            .entry(read.key)
            .or_default()
            .push(linearizable::Op {
                invoked: read.invoked,
                completed: Some(completed),
                kind: linearizable::Kind::Read(value),
            });
        self.stats.reads += 1;
    }

    fn on_write(&mut self, i: usize, msg: Msg) {
        let Msg::Write {
            op,
            key,
            value,
            client,
        } = msg
        else {
            return;
        };
        // Only the member that orders the key's writes applies it; others drop it (the
        // client times out and the write stays unknown).
        if self.route(i, &key, true) != Some(i) {
            return;
        }
        let cache = self.nodes[i].cache();
        if cache.put(&key, &value, &WriteOptions::default()).is_err() {
            return;
        }
        let changes: Vec<_> = std::mem::take(&mut *self.nodes[i].outbox.lock());
        let segment = cache.segment_of(&key);
        let version = changes.last().and_then(|c| c.2.as_ref()).map(|e| e.version);
        if let (Some(version), Some(value)) = (
            version,
            std::str::from_utf8(&value)
                .ok()
                .and_then(|v| v.parse::<u64>().ok()),
        ) {
            self.versions.insert(value, version);
        }
        let installed = self.nodes[i].installed;
        self.note_key(&key, || {
            format!(
                "n{i} primary applies {} v{version:?} op{op} (topology {installed:?})",
                String::from_utf8_lossy(&value)
            )
        });
        let me = MemberId(self.nodes[i].name.clone());
        let backups: BTreeSet<usize> = self.nodes[i]
            .route
            .as_ref()
            .and_then(|route| route.segment(segment))
            .map(|owners| owners.write.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|id| *id != me)
            .filter_map(|id| self.index_of(&id.0))
            .collect();
        for &backup in &backups {
            self.send(
                i,
                backup,
                Msg::Replicate {
                    op,
                    changes: changes.clone(),
                },
            );
        }
        self.nodes[i].waiting.insert(
            op,
            Waiting {
                client,
                segment,
                backups,
            },
        );
        self.settle(i, op);
    }

    /// Answers a write once every backup acknowledged it or left the agreed members (as the
    /// server's replication streams are retired only by an agreed topology, never by a
    /// node's own failure detector: a minority cannot acknowledge alone). Reads that waited
    /// for it are answered once nothing else they saw is in flight.
    fn settle(&mut self, i: usize, op: u64) {
        let Some(waiting) = self.nodes[i].waiting.get(&op).cloned() else {
            return;
        };
        let agreed = |b: &usize| {
            self.nodes[i]
                .state
                .node(&self.nodes[*b].name)
                .is_some_and(|record| record.raft_id == self.nodes[*b].raft_id)
        };
        if waiting.backups.iter().any(agreed) {
            return;
        }
        self.nodes[i].waiting.remove(&op);
        if waiting.client == i {
            self.on_done(op);
        } else {
            self.send(i, waiting.client, Msg::Done { op });
        }
        let mut ready = Vec::new();
        self.nodes[i].parked.retain_mut(|read| {
            read.owed.remove(&op);
            if read.owed.is_empty() {
                ready.push(read.clone());
                false
            } else {
                true
            }
        });
        for read in ready {
            self.answer_read(i, &read);
        }
    }

    fn on_done(&mut self, op: u64) {
        let Some(pending) = self.pending.remove(&op) else {
            return;
        };
        let (key, value) = (pending.key.clone(), pending.value);
        self.note_key(&key, || format!("ack op{op} value {value}"));
        let completed = self.step_now();
        self.ops
            .entry(key.clone())
            .or_default()
            .push(linearizable::Op {
                invoked: pending.invoked,
                completed: Some(completed),
                kind: linearizable::Kind::Write(value),
            });
        let history = self.histories.entry(pending.key).or_default();
        // Writes to one key from the simulator's clients are answered in the order the
        // primary applied them (one primary, FIFO links), so the last answered is the newest.
        // Writes from several clients may be in flight together: the newest acknowledged is
        // the one applied last, at the highest version.
        let version = self.versions.get(&pending.value).copied().unwrap_or(0);
        if history.acked.is_none() || history.acked_version < version {
            history.acked = Some(pending.value);
            history.acked_version = version;
            let versions = &self.versions;
            history
                .unknown
                .retain(|value| versions.get(value).is_some_and(|&v| v > version));
        }
        self.stats.acknowledged += 1;
    }

    /// Whether node `i` orders the writes of `segment` by the route it installed.
    fn orders(&self, i: usize, segment: u32) -> bool {
        let me = MemberId(self.nodes[i].name.clone());
        self.nodes[i]
            .route
            .as_ref()
            .and_then(|route| route.segment(segment))
            .is_some_and(|owners| owners.write.first() == Some(&me))
    }

    /// Changes a primary replicated to node `i`, applied — as the server's `apply_in_order`
    /// does — only if the sender is their segment's primary in `i`'s own topology. Refused,
    /// they are sent again (the server's stream resends after `NotOwner`) while the sender
    /// still orders them; once it no longer does, it drops them and their write fails.
    fn on_replicate(
        &mut self,
        i: usize,
        from: usize,
        op: u64,
        changes: Vec<(u32, Vec<u8>, Option<EntryImage>)>,
    ) {
        let sender = MemberId(self.nodes[from].name.clone());
        let refused = changes.iter().any(|(segment, _, _)| {
            self.nodes[i]
                .route
                .as_ref()
                .and_then(|route| route.segment(*segment))
                .and_then(|owners| owners.write.first())
                != Some(&sender)
        });
        if refused {
            let still_orders = changes
                .iter()
                .all(|(segment, _, _)| self.orders(from, *segment));
            if still_orders && self.nodes[from].waiting.contains_key(&op) {
                self.note(format!("n{i} refuses op{op} from n{from}; sent again"));
                self.send(from, i, Msg::Replicate { op, changes });
            } else if self.nodes[from].waiting.remove(&op).is_some() {
                self.note(format!("n{from} no longer orders op{op}: its write fails"));
            }
            return;
        }
        let cache = self.nodes[i].cache();
        for (segment, key, image) in changes {
            let shown = image
                .as_ref()
                .map(|e| (String::from_utf8_lossy(&e.value).into_owned(), e.version));
            self.note_key(&key, || {
                format!("n{i} backup applies {shown:?} from n{from} op{op}")
            });
            if let Some(keys) = self.nodes[i].touched.get_mut(&segment) {
                keys.insert(key.clone());
            }
            let change = match image.and_then(|image| image.to_entry().ok()) {
                Some(entry) => RemoteChange::Put(entry),
                None => RemoteChange::Remove,
            };
            let _ = applying_remote(|| cache.apply_remote(&key, change));
        }
        self.send(i, from, Msg::Ack { op });
    }

    fn on_ack(&mut self, i: usize, from: usize, op: u64) {
        if let Some(waiting) = self.nodes[i].waiting.get_mut(&op) {
            waiting.backups.remove(&from);
        }
        self.settle(i, op);
    }

    /// A new owner's fetch, answered as the server's `answer_fetch` does, by the production
    /// fence (`placement::fetch_answer`): by the segment's primary, once it installed the
    /// asker's rebalance.
    fn on_fetch(&mut self, i: usize, from: usize, segment: u32, rebalance: u32) {
        let me = MemberId(self.nodes[i].name.clone());
        match placement::fetch_answer(self.nodes[i].route.as_ref(), &me, segment, rebalance) {
            placement::FetchAnswer::Serve => {}
            placement::FetchAnswer::Wait => {
                // Looked at again shortly, as the server's primary polls its routes.
                let incarnation = (self.nodes[from].incarnation, self.nodes[i].incarnation);
                self.schedule(
                    self.now + 5,
                    Event::Deliver {
                        from,
                        to: i,
                        incarnation,
                        msg: Msg::Fetch { segment, rebalance },
                    },
                );
                return;
            }
            // The asker's fetch fails; it asks again on its next tick.
            placement::FetchAnswer::Stale | placement::FetchAnswer::NotPrimary => return,
        }
        let entries: Vec<EntryImage> = self.nodes[i]
            .cache()
            .iter_segments(vec![segment])
            .map(|entry| EntryImage::of(&entry))
            .collect();
        self.send(
            i,
            from,
            Msg::Entries {
                segment,
                rebalance,
                entries,
            },
        );
    }

    fn on_entries(&mut self, i: usize, segment: u32, rebalance: u32, entries: Vec<EntryImage>) {
        if self.nodes[i].fetch_rebalance != Some(rebalance)
            || self.nodes[i].fetching.remove(&segment).is_none()
        {
            return;
        }
        let cache = self.nodes[i].cache();
        let touched = self.nodes[i].touched.remove(&segment).unwrap_or_default();
        for image in entries {
            let shown = (
                String::from_utf8_lossy(&image.value).into_owned(),
                image.version,
            );
            let skip = touched.contains(&image.key);
            self.note_key(&image.key, || {
                format!("n{i} fetched {shown:?} seg{segment} skip={skip}")
            });
            if touched.contains(&image.key) {
                continue;
            }
            if let Ok(entry) = image.to_entry() {
                let _ = applying_remote(|| {
                    cache.apply_remote(&image.key, RemoteChange::PutIfNewer(entry))
                });
            }
        }
        self.transfer_progress(i);
    }

    // ---- failure detection (modelled) and faults ---------------------------------------

    fn detect(&mut self) {
        // Failure detection takes a while: views change every DETECTION_MS at most.
        if self.now % DETECTION_MS >= TICK_MS {
            return;
        }
        for i in 0..self.nodes.len() {
            if !self.nodes[i].up {
                continue;
            }
            let view: BTreeSet<usize> = (0..self.nodes.len())
                .filter(|&j| self.reachable(i, j))
                .collect();
            // DEGRADED as the server decides it (`engine::degraded_reason` over the
            // installed route); back only once its topology is the agreed one.
            if let Some(route) = &self.nodes[i].route {
                let reason = engine::degraded_reason(
                    &route.topology.members(),
                    route.segments.iter().map(|owners| owners.read.as_slice()),
                    &|member| self.index_of(&member.0).is_some_and(|j| view.contains(&j)),
                );
                let current = self.committed.cache(CACHE).map(|c| c.topology.id())
                    == Some(route.topology.id());
                if reason.is_some() {
                    self.nodes[i].degraded = true;
                } else if self.nodes[i].degraded && current {
                    self.nodes[i].degraded = false;
                }
            }
            if view != self.nodes[i].view {
                self.nodes[i].view = view;
                let waiting: Vec<u64> = self.nodes[i].waiting.keys().copied().collect();
                for op in waiting {
                    self.settle(i, op);
                }
            }
        }
    }

    fn stable(&self) -> bool {
        self.committed
            .cache(CACHE)
            .is_some_and(|c| c.topology.phase() == Phase::Stable)
            && (0..self.nodes.len()).all(|i| {
                !self.nodes[i].up
                    || self.nodes[i].installed
                        == self
                            .committed
                            .cache(CACHE)
                            .map(|c| (c.topology.id(), c.topology.phase()))
            })
    }

    fn fault(&mut self) {
        if let Some(at) = self.heal_at {
            if self.now >= at {
                self.heal();
            }
            return;
        }
        if !self.faults_on || !self.stable() || self.random(100) >= 3 {
            return;
        }
        // At most one node (owners − 1 with two owners) away at a time.
        let victim = self.random(self.nodes.len() as u64) as usize;
        let mut lasting = 200 + self.random(2_000);
        let kind = self.random(4);
        if kind == 3 {
            // A graceful leave (SIGTERM): the node is released from the members at once, as
            // it asks; it goes on answering for a moment, then its process exits, and a
            // supervisor starts it again later.
            let style = if self.random(2) == 0 {
                Leaving::Draining
            } else {
                Leaving::Frozen
            };
            self.note(format!("n{victim} leaves ({style:?})"));
            self.stats.leaves += 1;
            let incarnation = self.nodes[victim].incarnation;
            self.nodes[victim].leaving = Some(style);
            self.departed.insert((victim, incarnation));
            let exit = self.now + 1 + self.random(30);
            let deadline = self.now + LEAVE_FOLLOW_MS;
            self.schedule(
                exit,
                Event::Exit {
                    node: victim,
                    incarnation,
                    deadline,
                },
            );
            self.heal_at = Some(self.now + LEAVE_FOLLOW_MS + lasting);
            return;
        }
        if kind < 2 {
            // A crash; one in two restarts at once, as a process supervisor would — well
            // within failure detection, while the others still route to the process that
            // died and the agreed members still name it.
            if kind == 1 {
                lasting = self.random(DETECTION_MS / 2);
                self.stats.quick_restarts += 1;
            }
            self.note(format!("crash n{victim}"));
            self.stats.crashes += 1;
            self.nodes[victim].up = false;
        } else {
            self.note(format!("cut n{victim} off"));
            self.stats.partitions += 1;
            for j in 0..self.nodes.len() {
                if j != victim {
                    self.cut.insert((victim.min(j), victim.max(j)));
                }
            }
        }
        self.heal_at = Some(self.now + lasting);
    }

    /// A leaving node's process exits — a draining one once the agreed state it applied no
    /// longer names it (or after [`LEAVE_FOLLOW_MS`]), a frozen one when its time comes.
    fn exit(&mut self, i: usize, incarnation: u64, deadline: u64) {
        let node = &self.nodes[i];
        if node.incarnation != incarnation || !node.up {
            return;
        }
        let released = node.state.node(&node.name).is_none();
        if node.leaving == Some(Leaving::Draining) && !released && self.now < deadline {
            self.schedule(
                self.now + TICK_MS,
                Event::Exit {
                    node: i,
                    incarnation,
                    deadline,
                },
            );
            return;
        }
        self.note(format!("n{i} exits"));
        self.nodes[i].up = false;
    }

    fn heal(&mut self) {
        self.heal_at = None;
        if !self.cut.is_empty() {
            self.note("heal the partition".to_owned());
            self.cut.clear();
        }
        for i in 0..self.nodes.len() {
            if !self.nodes[i].up || self.nodes[i].leaving.is_some() {
                // Back as a new process: empty, with a new consensus id (a node still
                // leaving exits first).
                self.note(format!("restart n{i}"));
                let incarnation = self.nodes[i].incarnation + 1;
                self.nodes[i] = self.fresh_node(i, incarnation);
            }
        }
    }

    /// A node cut off from the leader may hold an old topology: after a partition heals it
    /// is told the log again from its start if its copy diverged (a removed member's state
    /// is replaced, as a Raft learner's is).
    fn resync(&mut self, i: usize) {
        if self.nodes[i].log_len > self.log.len() {
            self.nodes[i].log_len = 0;
            self.nodes[i].state = ClusterState::default();
        }
    }

    // ---- running -----------------------------------------------------------------------

    fn step(&mut self, until: u64) {
        while let Some(&Reverse((at, seq))) = self.queue.peek() {
            if at > until {
                break;
            }
            self.queue.pop();
            self.now = at;
            self.clock.set_ms(1_700_000_000_000 + at);
            let Some(event) = self.events.remove(&seq) else {
                continue;
            };
            match event {
                Event::Tick => {
                    if self.now % DETECTION_MS < TICK_MS {
                        for i in 0..self.nodes.len() {
                            if self.nodes[i].up {
                                self.retry(i);
                            }
                        }
                    }
                    self.detect();
                    self.fault();
                    self.lead();
                    if self.faults_on || self.random(4) == 0 {
                        for _ in 0..CLIENT_OPS_PER_TICK {
                            self.client_op();
                        }
                    }
                    self.expire_clients();
                    let next = self.now + TICK_MS;
                    self.schedule(next, Event::Tick);
                }
                Event::Deliver {
                    from,
                    to,
                    incarnation,
                    msg,
                } => {
                    if incarnation != (self.nodes[from].incarnation, self.nodes[to].incarnation)
                        || !self.reachable(from, to)
                    {
                        continue;
                    }
                    self.handle(from, to, msg);
                }
                Event::Exit {
                    node,
                    incarnation,
                    deadline,
                } => self.exit(node, incarnation, deadline),
            }
        }
        self.now = until;
    }

    fn handle(&mut self, from: usize, to: usize, msg: Msg) {
        match msg {
            Msg::Append {
                from: index,
                entries,
            } => {
                self.resync(to);
                self.on_append(to, index, entries);
            }
            Msg::Propose(command) => {
                if self.leader() == Some(to) {
                    self.commit(command);
                }
            }
            write @ Msg::Write { .. } => self.on_write(to, write),
            Msg::Replicate { op, changes } => self.on_replicate(to, from, op, changes),
            Msg::Ack { op } => self.on_ack(to, from, op),
            Msg::Done { op } => self.on_done(op),
            read @ Msg::Read { .. } => self.on_read(to, read),
            Msg::ReadDone { op, value } => self.on_read_done(op, value),
            Msg::Fetch { segment, rebalance } => self.on_fetch(to, from, segment, rebalance),
            Msg::Entries {
                segment,
                rebalance,
                entries,
            } => self.on_entries(to, segment, rebalance, entries),
        }
    }

    fn expire_clients(&mut self) {
        let now = self.now;
        let before = self.reads.len();
        self.reads
            .retain(|_, read| now - read.issued_ms <= CLIENT_TIMEOUT_MS);
        self.stats.unanswered_reads += (before - self.reads.len()) as u64;
        let expired: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| now - p.issued_ms > CLIENT_TIMEOUT_MS)
            .map(|(op, _)| *op)
            .collect();
        for op in expired {
            if let Some(pending) = self.pending.remove(&op) {
                self.stats.unanswered += 1;
                self.ops
                    .entry(pending.key.clone())
                    .or_default()
                    .push(linearizable::Op {
                        invoked: pending.invoked,
                        completed: None,
                        kind: linearizable::Kind::Write(pending.value),
                    });
                let history = self.histories.entry(pending.key).or_default();
                // It may have been applied after the last acknowledged write (it was, if
                // at a higher version), or never.
                let version = self.versions.get(&pending.value).copied();
                if version.is_some_and(|v| history.acked.is_none() || v > history.acked_version) {
                    history.unknown.insert(pending.value);
                }
            }
        }
    }

    /// Runs the safety phase, then the liveness phase, then the checkers.
    ///
    /// # Errors
    /// What a checker found, with the seed and the last events.
    pub fn run(mut self) -> Result<Stats, Failure> {
        self.schedule(0, Event::Tick);
        self.step(self.options.safety_ms);
        self.faults_on = false;
        self.heal();
        self.step(self.options.safety_ms + self.options.liveness_ms);
        // Answers still owed time out now: their writes stay unknown.
        let owed: Vec<u64> = self.pending.keys().copied().collect();
        for op in owed {
            if let Some(pending) = self.pending.get_mut(&op) {
                pending.issued_ms = 0;
            }
        }
        self.now += CLIENT_TIMEOUT_MS + 1;
        self.expire_clients();
        self.stats.topologies = self.committed.cache(CACHE).map_or(0, |c| c.topology.id());
        match self.check() {
            Ok(()) => Ok(self.stats),
            Err(reason) => Err(Failure {
                seed: self.options.seed,
                reason,
                trace: self.trace,
            }),
        }
    }

    fn check(&self) -> Result<(), String> {
        let record = self
            .committed
            .cache(CACHE)
            .ok_or_else(|| "the cache was never defined".to_owned())?;
        let topology = &record.topology;
        if topology.phase() != Phase::Stable {
            return Err(format!(
                "liveness: the topology is still in {:?} after every fault healed",
                topology.phase()
            ));
        }
        let live = self.nodes.iter().filter(|n| n.up).count();
        if topology.members().len() != live {
            return Err(format!(
                "liveness: {} members in the topology, {live} nodes up",
                topology.members().len()
            ));
        }
        for (i, node) in self.nodes.iter().enumerate() {
            if node.installed != Some((topology.id(), Phase::Stable)) {
                return Err(format!(
                    "agreement: n{i} installed {:?}, the cluster is at {}",
                    node.installed,
                    topology.id()
                ));
            }
        }
        let hash = topology.current();
        let wanted = self.options.owners.min(live);
        for segment in 0..hash.segment_count() {
            if hash.owner_ids(segment).len() != wanted {
                return Err(format!(
                    "liveness: segment {segment} has {} owners, wanted {wanted}",
                    hash.owner_ids(segment).len()
                ));
            }
        }
        // The auditor: every owner of a key holds its last acknowledged value, or a value
        // written after it whose answer never came.
        for (key, history) in &self.histories {
            let Some(acked) = history.acked else {
                continue;
            };
            let segment = self.nodes[0].cache().segment_of(key) as usize;
            for owner in hash.owner_ids(segment) {
                let Some(i) = self.index_of(&owner.0) else {
                    continue;
                };
                let held = self.nodes[i].cache().get(key).ok().flatten().and_then(|v| {
                    std::str::from_utf8(&v)
                        .ok()
                        .and_then(|t| t.parse::<u64>().ok())
                });
                let fine = held.is_some_and(|v| v == acked || history.unknown.contains(&v));
                if !fine {
                    return Err(format!(
                        "acknowledged write lost: {} holds {:?} on {}, acknowledged {acked}, unanswered {:?}",
                        String::from_utf8_lossy(key),
                        held,
                        owner,
                        history.unknown
                    ));
                }
            }
        }
        // Single-key histories are linearizable: the cache denies reads and writes while
        // DEGRADED, and reads run at the primary behind the read barrier.
        for (key, ops) in &self.ops {
            linearizable::check(ops).map_err(|violation| {
                format!(
                    "not linearizable (times are history steps): key {}: {violation}",
                    String::from_utf8_lossy(key)
                )
            })?;
        }
        self.check_listeners()?;
        if self.stats.acknowledged == 0 {
            return Err("no write was acknowledged".to_owned());
        }
        if self.stats.reads == 0 {
            return Err("no read was answered".to_owned());
        }
        Ok(())
    }
}

impl Sim {
    /// Listeners see each write once, in order: per node and key, versions only grow; no
    /// value is raised twice anywhere in the cluster (not by a backup's copy, nor by a
    /// transfer); every acknowledged write was raised.
    fn check_listeners(&self) -> Result<(), String> {
        let raised = self.raised.lock();
        let mut last: HashMap<(usize, u64, &[u8]), u64> = HashMap::new();
        let mut seen: HashSet<u64> = HashSet::new();
        for (i, incarnation, key, version, value) in raised.iter() {
            let previous = last.insert((*i, *incarnation, key.as_slice()), *version);
            if previous.is_some_and(|previous| previous >= *version) {
                return Err(format!(
                    "listener on n{i} saw {} at version {version} after version {previous:?}",
                    String::from_utf8_lossy(key)
                ));
            }
            if let Some(value) = value
                && !seen.insert(*value)
            {
                return Err(format!(
                    "listeners saw the write of {value} to {} twice",
                    String::from_utf8_lossy(key)
                ));
            }
        }
        for ops in self.ops.values() {
            for op in ops {
                if let (Some(_), linearizable::Kind::Write(value)) = (op.completed, &op.kind)
                    && !seen.contains(value)
                {
                    return Err(format!("no listener saw the acknowledged write of {value}"));
                }
            }
        }
        Ok(())
    }
}

/// Runs one seed with the default options.
///
/// # Errors
/// The checkers' finding, with the seed and the last events.
pub fn run_seed(seed: u64) -> Result<Stats, Failure> {
    Sim::new(Options::with_seed(seed)).run()
}
