//! Consensus on the cluster metadata: openraft over the cluster transport, with the log and
//! the state machine (`weft_cluster::state::ClusterState`) in memory.
//!
//! The metadata is small (members, cache definitions, topologies) and every node rebuilds
//! it from the others when it starts, so nothing is written to disk: a node that restarts
//! is a new consensus member (a new id) and learns the state from the leader. Raft is off
//! the data path; it orders topology changes only.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io::Cursor;
use std::net::SocketAddr;
use std::ops::RangeBounds;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::storage::{LogFlushed, RaftLogStorage, RaftStateMachine};
use openraft::{
    BasicNode, EntryPayload, LogId, LogState, RaftLogReader, RaftSnapshotBuilder, Snapshot,
    SnapshotMeta, StorageError, StorageIOError, StoredMembership, Vote,
};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use weft_cluster::state::{ClusterState, Command};
use weft_cluster::wire::{RaftRpc, Request, Response};

use super::transport::Transport;

/// A node's id in the consensus group.
pub type NodeId = u64;

/// What applying a command said.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// Whether the state changed.
    pub changed: bool,
    /// Why the command was refused, if it was.
    pub refused: Option<String>,
}

openraft::declare_raft_types!(
    /// Weft's consensus types: cluster metadata commands over the cluster transport.
    pub TypeConfig:
        D = Command,
        R = Outcome,
        NodeId = NodeId,
        Node = BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A Raft node.
pub type Raft = openraft::Raft<TypeConfig>;
type Entry = openraft::Entry<TypeConfig>;
type StoreError = StorageError<NodeId>;

/// How long one Raft message may take on the wire.
const RPC_TIMEOUT: Duration = Duration::from_secs(2);

/// The consensus settings for a LAN cluster.
///
/// # Errors
/// If openraft refuses them (a bug).
pub fn config(cluster_name: &str) -> crate::Result<Arc<openraft::Config>> {
    let config = openraft::Config {
        cluster_name: cluster_name.to_owned(),
        // openraft abandons an append after one heartbeat interval and a vote after the
        // minimum election timeout: generous values ride out a busy two-core machine.
        heartbeat_interval: 250,
        election_timeout_min: 1_000,
        election_timeout_max: 2_000,
        install_snapshot_timeout: 2_000,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(500),
        max_in_snapshot_log_to_keep: 100,
        ..openraft::Config::default()
    };
    config
        .validate()
        .map(Arc::new)
        .map_err(|error| crate::GridError::Consensus(error.to_string()))
}

// ---- log --------------------------------------------------------------------------------

#[derive(Debug, Default)]
struct LogInner {
    last_purged: Option<LogId<NodeId>>,
    entries: BTreeMap<u64, Entry>,
    committed: Option<LogId<NodeId>>,
    vote: Option<Vote<NodeId>>,
}

/// The Raft log, in memory. Clones share it.
#[derive(Debug, Clone, Default)]
pub struct LogStore {
    inner: Arc<Mutex<LogInner>>,
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StoreError> {
        let inner = self.inner.lock();
        Ok(inner.entries.range(range).map(|(_, e)| e.clone()).collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StoreError> {
        let inner = self.inner.lock();
        let last = inner
            .entries
            .values()
            .next_back()
            .map(|e| e.log_id)
            .or(inner.last_purged);
        Ok(LogState {
            last_purged_log_id: inner.last_purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StoreError> {
        self.inner.lock().vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StoreError> {
        Ok(self.inner.lock().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> Result<(), StoreError> {
        self.inner.lock().committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StoreError> {
        Ok(self.inner.lock().committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StoreError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        {
            let mut inner = self.inner.lock();
            for entry in entries {
                inner.entries.insert(entry.log_id.index, entry);
            }
        }
        // Memory is as durable as this log gets.
        callback.log_io_completed(Ok(()));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StoreError> {
        let mut inner = self.inner.lock();
        inner.entries.split_off(&log_id.index);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StoreError> {
        let mut inner = self.inner.lock();
        inner.last_purged = Some(log_id);
        let kept = inner.entries.split_off(&(log_id.index + 1));
        inner.entries = kept;
        Ok(())
    }
}

// ---- state machine ----------------------------------------------------------------------

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct Machine {
    last_applied: Option<LogId<NodeId>>,
    last_membership: StoredMembership<NodeId, BasicNode>,
    state: ClusterState,
}

#[derive(Debug)]
struct StoredSnapshot {
    meta: SnapshotMeta<NodeId, BasicNode>,
    data: Vec<u8>,
}

#[derive(Debug)]
struct MachineInner {
    machine: Machine,
    snapshot: Option<StoredSnapshot>,
    snapshots_built: u64,
    published: watch::Sender<Arc<ClusterState>>,
}

/// The cluster metadata as Raft applies it; every applied change is published on a watch
/// channel the node reacts to.
#[derive(Debug, Clone)]
pub struct StateMachine {
    inner: Arc<Mutex<MachineInner>>,
}

impl StateMachine {
    /// An empty state machine and the channel its states are published on.
    #[must_use]
    pub fn new() -> (Self, watch::Receiver<Arc<ClusterState>>) {
        let (published, receiver) = watch::channel(Arc::new(ClusterState::default()));
        (
            Self {
                inner: Arc::new(Mutex::new(MachineInner {
                    machine: Machine::default(),
                    snapshot: None,
                    snapshots_built: 0,
                    published,
                })),
            },
            receiver,
        )
    }
}

fn storage_error(error: &(impl std::error::Error + 'static)) -> StoreError {
    StorageIOError::read_state_machine(error).into()
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StoreError> {
        let mut inner = self.inner.lock();
        let data = serde_json::to_vec(&inner.machine).map_err(|e| storage_error(&e))?;
        inner.snapshots_built += 1;
        let snapshot_id = match inner.machine.last_applied {
            Some(last) => format!(
                "{}-{}-{}",
                last.leader_id, last.index, inner.snapshots_built
            ),
            None => format!("--{}", inner.snapshots_built),
        };
        let meta = SnapshotMeta {
            last_log_id: inner.machine.last_applied,
            last_membership: inner.machine.last_membership.clone(),
            snapshot_id,
        };
        inner.snapshot = Some(StoredSnapshot {
            meta: meta.clone(),
            data: data.clone(),
        });
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>), StoreError> {
        let inner = self.inner.lock();
        Ok((
            inner.machine.last_applied,
            inner.machine.last_membership.clone(),
        ))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Outcome>, StoreError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut inner = self.inner.lock();
        let mut outcomes = Vec::new();
        let mut changed = false;
        for entry in entries {
            inner.machine.last_applied = Some(entry.log_id);
            let outcome = match entry.payload {
                EntryPayload::Blank => Outcome::default(),
                EntryPayload::Normal(command) => match inner.machine.state.apply(command) {
                    Ok(applied) => {
                        changed |= applied;
                        Outcome {
                            changed: applied,
                            refused: None,
                        }
                    }
                    Err(error) => Outcome {
                        changed: false,
                        refused: Some(error.to_string()),
                    },
                },
                EntryPayload::Membership(membership) => {
                    inner.machine.last_membership =
                        StoredMembership::new(Some(entry.log_id), membership);
                    Outcome::default()
                }
            };
            outcomes.push(outcome);
        }
        if changed {
            let state = Arc::new(inner.machine.state.clone());
            inner.published.send_replace(state);
        }
        Ok(outcomes)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StoreError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StoreError> {
        let data = snapshot.into_inner();
        let mut machine: Machine = serde_json::from_slice(&data)
            .map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?;
        machine.last_applied = meta.last_log_id;
        machine.last_membership = meta.last_membership.clone();
        let mut inner = self.inner.lock();
        let state = Arc::new(machine.state.clone());
        inner.machine = machine;
        inner.snapshot = Some(StoredSnapshot {
            meta: meta.clone(),
            data,
        });
        inner.published.send_replace(state);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StoreError> {
        let inner = self.inner.lock();
        Ok(inner.snapshot.as_ref().map(|stored| Snapshot {
            meta: stored.meta.clone(),
            snapshot: Box::new(Cursor::new(stored.data.clone())),
        }))
    }
}

// ---- network ----------------------------------------------------------------------------

/// Opens "connections" to other consensus members: requests over the cluster transport.
#[derive(Debug, Clone)]
pub struct Network {
    transport: Transport,
}

impl Network {
    /// Raft messages over `transport`.
    #[must_use]
    pub fn new(transport: Transport) -> Self {
        Self { transport }
    }
}

/// The way to one consensus member.
#[derive(Debug)]
pub struct Connection {
    transport: Transport,
    target: NodeId,
    addr: Option<SocketAddr>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Connection {
        Connection {
            transport: self.transport.clone(),
            target,
            addr: node.addr.parse().ok(),
        }
    }
}

fn unreachable<E: std::error::Error>(reason: &str) -> RPCError<NodeId, BasicNode, E> {
    let error = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, reason.to_owned());
    RPCError::Unreachable(openraft::error::Unreachable::new(&error))
}

impl Connection {
    async fn call<Req, Resp, E>(
        &self,
        kind: RaftRpc,
        request: &Req,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>
    where
        Req: Serialize,
        Resp: serde::de::DeserializeOwned,
        E: std::error::Error + serde::de::DeserializeOwned,
    {
        let Some(addr) = self.addr else {
            return Err(unreachable("no address"));
        };
        let body =
            serde_json::to_vec(request).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let response = self
            .transport
            .call(addr, Request::Raft(kind, self.target, body), RPC_TIMEOUT)
            .await
            .map_err(|e| unreachable(&e.to_string()))?;
        let Response::Raft(body) = response else {
            return Err(unreachable("unexpected response"));
        };
        let result: Result<Resp, RaftError<NodeId, E>> =
            serde_json::from_slice(&body).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call(RaftRpc::AppendEntries, &rpc).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        self.call(RaftRpc::InstallSnapshot, &rpc).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call(RaftRpc::Vote, &rpc).await
    }
}

/// Answers a Raft message another member sent (the receiving side of [`Connection`]).
pub async fn answer(raft: &Raft, kind: RaftRpc, body: &[u8]) -> Response {
    fn encode<T: Serialize>(result: &T) -> Response {
        match serde_json::to_vec(result) {
            Ok(body) => Response::Raft(body),
            Err(error) => Response::Error(error.to_string()),
        }
    }
    match kind {
        RaftRpc::AppendEntries => match serde_json::from_slice(body) {
            Ok(request) => encode(&raft.append_entries(request).await),
            Err(error) => Response::Error(error.to_string()),
        },
        RaftRpc::Vote => match serde_json::from_slice(body) {
            Ok(request) => encode(&raft.vote(request).await),
            Err(error) => Response::Error(error.to_string()),
        },
        RaftRpc::InstallSnapshot => match serde_json::from_slice(body) {
            Ok(request) => encode(&raft.install_snapshot(request).await),
            Err(error) => Response::Error(error.to_string()),
        },
    }
}
