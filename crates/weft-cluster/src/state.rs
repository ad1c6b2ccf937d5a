//! The cluster's metadata — its members, its caches and each cache's topology — as a
//! deterministic state machine over [`Command`]s.
//!
//! Every node applies the same commands in the same order (the server agrees on that order
//! through Raft), so every node sees the same sequence of topologies. Nothing here does I/O
//! or reads a clock: the same commands always give the same state.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::consistent_hash::{ConsistentHash, HashError, Mode};
use crate::member::{Location, Member, MemberId};
use crate::topology::{CacheTopology, Phase};

/// A node as the cluster metadata knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// Its unique name (the member id).
    pub name: String,
    /// Its id in the consensus group: new for every start of the process, so that a node
    /// that lost its state never speaks with an old voice.
    pub raft_id: u64,
    /// Where it listens for cluster traffic.
    pub cluster_addr: SocketAddr,
    /// Where clients reach it (the address Hot Rod topologies and CLUSTER SLOTS announce).
    pub endpoint: SocketAddr,
    /// Site, rack and machine.
    pub location: Location,
}

impl NodeRecord {
    /// The node as a member of consistent hashes.
    #[must_use]
    pub fn member(&self) -> Member {
        Member {
            id: MemberId(self.name.clone()),
            location: self.location.clone(),
        }
    }
}

/// A clustered cache: its definition and its topology.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheRecord {
    /// The cache's configuration, as JSON (parsed by each node).
    pub config: String,
    /// Where its segments live.
    pub topology: CacheTopology,
}

/// A change to the cluster metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// The live members are now these (sent by the coordinator when failure detection says
    /// someone joined or left). Every cache's topology starts moving to them.
    Members(Vec<NodeRecord>),
    /// Defines a clustered cache on every node. Defining it again with the same
    /// configuration does nothing; with another, it is refused.
    DefineCache {
        /// Its name.
        name: String,
        /// Its configuration, as JSON.
        config: String,
        /// Copies per segment.
        mode: Mode,
        /// Segment count.
        segments: u32,
    },
    /// Removes a cache from every node.
    RemoveCache {
        /// Its name.
        name: String,
    },
    /// A member finished the current phase of a cache's rebalance.
    Confirm {
        /// The cache.
        cache: String,
        /// The member.
        member: MemberId,
        /// The rebalance it confirms (older ones are ignored).
        rebalance_id: u32,
        /// The phase it confirms (a late or repeated confirmation of an earlier phase is
        /// ignored, so confirmations can be retried).
        phase: Phase,
    },
    /// A member back from a partition merged what it held of these lost segments of a
    /// cache into the cluster (`CacheTopology::lost`).
    Merged {
        /// The cache.
        cache: String,
        /// The segments.
        segments: Vec<u32>,
    },
}

/// Why a command was refused (every node refuses it alike).
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize, Deserialize)]
pub enum StateError {
    /// The cache exists with another configuration.
    #[error("cache `{0}` already exists with another configuration")]
    Conflict(String),
    /// The cache's hash cannot be built.
    #[error("cache `{cache}`: {reason}")]
    Hash {
        /// The cache.
        cache: String,
        /// Why.
        reason: String,
    },
    /// No such cache.
    #[error("cache `{0}` does not exist")]
    NoCache(String),
}

/// The cluster metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterState {
    nodes: BTreeMap<String, NodeRecord>,
    caches: BTreeMap<String, CacheRecord>,
    /// When each member (re)joined: the count of commands applied then. A node that sees
    /// this change for itself was dropped and re-admitted meanwhile (a partition), so what
    /// it had in flight is void.
    #[serde(default)]
    joined: BTreeMap<String, u64>,
    /// Every name ever admitted: the consensus id of its latest process, and how many
    /// processes by that name were admitted. Never pruned (one entry per name), so a process
    /// admitted after another by its name knows that the cluster went on without it: what it
    /// stored before is older than what the cluster holds.
    #[serde(default)]
    incarnations: BTreeMap<String, (u64, u32)>,
    /// Commands applied, for logs and metrics.
    applied: u64,
}

impl ClusterState {
    /// The members, by name.
    #[must_use]
    pub fn nodes(&self) -> &BTreeMap<String, NodeRecord> {
        &self.nodes
    }

    /// The clustered caches, by name.
    #[must_use]
    pub fn caches(&self) -> &BTreeMap<String, CacheRecord> {
        &self.caches
    }

    /// One cache.
    #[must_use]
    pub fn cache(&self, name: &str) -> Option<&CacheRecord> {
        self.caches.get(name)
    }

    /// The node named `name`.
    #[must_use]
    pub fn node(&self, name: &str) -> Option<&NodeRecord> {
        self.nodes.get(name)
    }

    /// When member `name` last joined (see the field's doc), if it is a member.
    #[must_use]
    pub fn joined(&self, name: &str) -> Option<u64> {
        self.joined.get(name).copied()
    }

    /// How many processes by the name `name` were admitted, this one included (0 when
    /// none was). More than one means the cluster had a member by that name before.
    #[must_use]
    pub fn incarnation(&self, name: &str) -> u32 {
        self.incarnations.get(name).map_or(0, |&(_, count)| count)
    }

    /// How many commands were applied.
    #[must_use]
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// Applies `command`. Returns whether the state changed.
    ///
    /// # Errors
    /// [`StateError`] when the command is refused; the state is then unchanged.
    pub fn apply(&mut self, command: Command) -> Result<bool, StateError> {
        self.applied += 1;
        match command {
            Command::Members(nodes) => Ok(self.set_members(nodes)),
            Command::DefineCache {
                name,
                config,
                mode,
                segments,
            } => self.define(name, config, mode, segments),
            Command::RemoveCache { name } => match self.caches.remove(&name) {
                Some(_) => Ok(true),
                None => Err(StateError::NoCache(name)),
            },
            Command::Confirm {
                cache,
                member,
                rebalance_id,
                phase,
            } => match self.caches.get_mut(&cache) {
                Some(record) if record.topology.phase() == phase => {
                    Ok(record.topology.confirm(&member, rebalance_id))
                }
                Some(_) => Ok(false),
                None => Err(StateError::NoCache(cache)),
            },
            Command::Merged { cache, segments } => match self.caches.get_mut(&cache) {
                Some(record) => Ok(record.topology.merged(&segments)),
                None => Err(StateError::NoCache(cache)),
            },
        }
    }

    fn live_members(&self) -> Vec<Member> {
        self.nodes.values().map(NodeRecord::member).collect()
    }

    fn set_members(&mut self, nodes: Vec<NodeRecord>) -> bool {
        if nodes.is_empty() {
            // Nobody left to own anything: keep the last topology (a node that comes back
            // restarts from it).
            return false;
        }
        let nodes: BTreeMap<String, NodeRecord> = nodes
            .into_iter()
            .map(|node| (node.name.clone(), node))
            .collect();
        if nodes == self.nodes {
            return false;
        }
        // A node that restarted (same name, new consensus id) lost what it held: it leaves
        // every topology, then joins again like a new node.
        let restarted: Vec<String> = nodes
            .values()
            .filter(|node| {
                self.nodes
                    .get(&node.name)
                    .is_some_and(|old| old.raft_id != node.raft_id)
            })
            .map(|node| node.name.clone())
            .collect();
        for (name, node) in &nodes {
            let new = self
                .nodes
                .get(name)
                .is_none_or(|old| old.raft_id != node.raft_id);
            if new {
                self.joined.insert(name.clone(), self.applied);
            }
            let incarnation = self
                .incarnations
                .entry(name.clone())
                .or_insert((node.raft_id, 0));
            if incarnation.1 == 0 || incarnation.0 != node.raft_id {
                *incarnation = (node.raft_id, incarnation.1 + 1);
            }
        }
        self.joined.retain(|name, _| nodes.contains_key(name));
        self.nodes = nodes;
        let live = self.live_members();
        let staying: Vec<Member> = live
            .iter()
            .filter(|member| !restarted.contains(&member.id.0))
            .cloned()
            .collect();
        for record in self.caches.values_mut() {
            // Cannot fail: `live` is not empty, nor is `staying` when it is used.
            if !restarted.is_empty() && !staying.is_empty() {
                let _ = record.topology.members_changed(&staying);
            }
            let _ = record.topology.members_changed(&live);
        }
        true
    }

    fn define(
        &mut self,
        name: String,
        config: String,
        mode: Mode,
        segments: u32,
    ) -> Result<bool, StateError> {
        if let Some(existing) = self.caches.get(&name) {
            let same = existing.config == config && existing.topology.current().mode() == mode;
            return if same {
                Ok(false)
            } else {
                Err(StateError::Conflict(name))
            };
        }
        let hash = ConsistentHash::new(self.live_members(), segments as usize, mode).map_err(
            |error: HashError| StateError::Hash {
                cache: name.clone(),
                reason: error.to_string(),
            },
        )?;
        self.caches.insert(
            name,
            CacheRecord {
                config,
                topology: CacheTopology::new(hash),
            },
        );
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, raft_id: u64) -> NodeRecord {
        NodeRecord {
            name: name.to_owned(),
            raft_id,
            cluster_addr: SocketAddr::from(([127, 0, 0, 1], 7800)),
            endpoint: SocketAddr::from(([127, 0, 0, 1], 11222)),
            location: Location::default(),
        }
    }

    fn define(state: &mut ClusterState) {
        let defined = state.apply(Command::DefineCache {
            name: "c".into(),
            config: "{}".into(),
            mode: Mode::Distributed { owners: 2 },
            segments: 16,
        });
        assert_eq!(defined, Ok(true));
    }

    // Proves a cache is defined once, a conflicting definition is refused, and members
    // joining start a rebalance that confirmations finish.
    #[test]
    fn definitions_and_rebalances() {
        let mut state = ClusterState::default();
        assert_eq!(state.apply(Command::Members(vec![node("a", 1)])), Ok(true));
        define(&mut state);
        define_again_is_a_no_op(&mut state);
        let conflict = state.apply(Command::DefineCache {
            name: "c".into(),
            config: "{\"owners\":3}".into(),
            mode: Mode::Distributed { owners: 3 },
            segments: 16,
        });
        assert!(matches!(conflict, Err(StateError::Conflict(_))));
        assert_eq!(
            state.apply(Command::Members(vec![node("a", 1), node("b", 2)])),
            Ok(true)
        );
        let topology = &state.cache("c").map(|c| c.topology.clone());
        let Some(topology) = topology else {
            panic!("cache c is defined");
        };
        assert_eq!(topology.phase(), crate::topology::Phase::ReadOldWriteAll);
        let rebalance_id = topology.rebalance_id();
        for _ in 0..3 {
            for member in ["a", "b"] {
                let phase = state.cache("c").map(|c| c.topology.phase());
                let _ = state.apply(Command::Confirm {
                    cache: "c".into(),
                    member: MemberId(member.into()),
                    rebalance_id,
                    phase: phase.unwrap_or(crate::topology::Phase::Stable),
                });
            }
        }
        let topology = state.cache("c").map(|c| c.topology.clone());
        assert!(
            topology.is_some_and(|t| t.phase() == crate::topology::Phase::Stable
                && (0..16).all(|s| t.current().owner_ids(s).len() == 2))
        );
    }

    fn define_again_is_a_no_op(state: &mut ClusterState) {
        let again = state.apply(Command::DefineCache {
            name: "c".into(),
            config: "{}".into(),
            mode: Mode::Distributed { owners: 2 },
            segments: 16,
        });
        assert_eq!(again, Ok(false));
    }

    // Proves a node that restarted (new consensus id) is not trusted with the copies it had:
    // the rebalance that follows makes it fetch its segments again.
    #[test]
    fn a_restarted_node_fetches_again() {
        let mut state = ClusterState::default();
        let _ = state.apply(Command::Members(vec![node("a", 1), node("b", 2)]));
        define(&mut state);
        let _ = state.apply(Command::Members(vec![node("a", 1), node("b", 3)]));
        let topology = state.cache("c").map(|c| c.topology.clone());
        let Some(topology) = topology else {
            panic!("cache c is defined");
        };
        let b = MemberId("b".into());
        assert_eq!(topology.phase(), crate::topology::Phase::ReadOldWriteAll);
        assert!((0..16).all(|s| !topology.current().owner_ids(s).contains(&&b)));
        assert_eq!(topology.to_fetch(&b).len(), 16);
    }

    // Proves the state counts the processes admitted under each name: a restart (new id)
    // counts, a drop and re-admission of the same process does not, nor does a name that
    // was gone from the members for a while and comes back as the same process.
    #[test]
    fn incarnations_count_processes_by_name() {
        let mut state = ClusterState::default();
        assert_eq!(state.incarnation("a"), 0);
        let _ = state.apply(Command::Members(vec![node("a", 1), node("b", 2)]));
        assert_eq!((state.incarnation("a"), state.incarnation("b")), (1, 1));
        // b is cut off, then comes back as the same process.
        let _ = state.apply(Command::Members(vec![node("a", 1)]));
        let _ = state.apply(Command::Members(vec![node("a", 1), node("b", 2)]));
        assert_eq!(state.incarnation("b"), 1);
        // b restarts while a keeps the cluster, and is gone a while before it is admitted.
        let _ = state.apply(Command::Members(vec![node("a", 1)]));
        let _ = state.apply(Command::Members(vec![node("a", 1), node("b", 7)]));
        assert_eq!((state.incarnation("a"), state.incarnation("b")), (1, 2));
    }
}
