//! A member's decisions about the agreed cluster state, as a state machine without IO.
//!
//! The server's node and the simulator both feed it the same inputs — each cluster state
//! consensus agrees on, the passing of time, the end of a state transfer — and carry out the
//! [`Effect`]s it returns: install a route, fetch segments, propose a confirmation, merge or
//! drop what this member holds, fence the writes in flight. What a decision needs to know of
//! the member's own data it asks through [`Local`]. Deciding here, once, is what lets the
//! simulator check the production logic over hundreds of seeded runs instead of a copy of
//! it (see `weft-sim`).
//!
//! Which decisions live here: joining and being dropped (fencing), first admission (keep or
//! discard what was stored), re-admission after a partition (merge), installing each
//! topology phase, starting, retrying and confirming state transfers, dropping segments no
//! longer owned, and removing caches the cluster removed. How a segment travels, how
//! entries are applied and how writes replicate stay with the caller: those are IO.

use std::collections::{HashMap, HashSet};

use crate::state::{ClusterState, Command};
use crate::topology::{CacheTopology, Phase};
use crate::{ConsistentHash, MemberId};

/// How often a confirmation is proposed again while the phase it confirms goes on: a
/// proposal can be lost with a leader, and nothing else would repeat it.
pub const CONFIRM_RETRY_MS: u64 = 1_000;
/// Rebalances remembered per cache (for confirmations and finished transfers): older ones
/// cannot come back, since rebalance ids only grow.
const REBALANCES_KEPT: u32 = 8;

/// Segments to fetch, each with the members that hold it now, the preferred first.
pub type Sources = Vec<(u32, Vec<MemberId>)>;

/// What a member merges of its stored entries into the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merge {
    /// Everything it stored: the cluster formed anew with this member, so what it stored is
    /// as good as anyone's (newest version wins).
    All,
    /// The segments it no longer owns: it was cut off and re-admitted, and its entries of
    /// those go by the cache's merge policy.
    Unowned,
}

/// Something the caller must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// This member was dropped from the agreed members: writes waiting for backups were
    /// never acknowledged by the cluster and fail.
    Fence,
    /// The agreed members changed: refresh who requests go to and replicate to.
    Members,
    /// The cluster defines this cache and this member lacks it: create it from the
    /// definition in the state. If that fails, call [`Engine::not_created`].
    Create {
        /// The cache.
        cache: String,
    },
    /// Empty this member's copy of the cache (memory and stores): it rejoins a cluster that
    /// went on without it, so what it stored is older than what the cluster holds.
    Discard {
        /// The cache.
        cache: String,
    },
    /// The cache is no longer DEGRADED here: the majority re-admitted this member with the
    /// state it now has.
    Available {
        /// The cache.
        cache: String,
    },
    /// Route the cache's requests by this topology from now on.
    Route {
        /// The cache.
        cache: String,
        /// The topology.
        topology: CacheTopology,
        /// Whether this member must be left out of every segment's owners: it is not
        /// admitted yet, and the topology may name its predecessor by the same name.
        exclude_me: bool,
    },
    /// Fetch these segments of the cache from their current owners, then call
    /// [`Engine::transfer_finished`].
    Transfer {
        /// The cache.
        cache: String,
        /// The rebalance the transfer belongs to.
        rebalance: u32,
        /// Each segment with the member to fetch it from: its primary now, which answers
        /// once it installed the rebalance (`placement::FetchAnswer`). A segment without
        /// any lost every copy: it starts empty here.
        segments: Sources,
    },
    /// Propose this command to consensus.
    Propose(Command),
    /// Merge what this member holds into the cluster, then drop the segments it does not
    /// own in this hash.
    Merge {
        /// The cache.
        cache: String,
        /// What is merged.
        merge: Merge,
        /// The hash the merge routes by.
        hash: ConsistentHash,
    },
    /// Drop the segments this member does not own in this hash (forget them: the owners
    /// keep their copies).
    DropUnowned {
        /// The cache.
        cache: String,
        /// The hash.
        hash: ConsistentHash,
    },
    /// The cluster removed the cache: remove it here, with its data.
    Remove {
        /// The cache.
        cache: String,
    },
}

/// What a decision needs to know of this member's own data.
pub trait Local {
    /// Whether this member has the cache.
    fn has_cache(&self, cache: &str) -> bool;
    /// Whether this member holds any entry of the cache (memory or stores).
    fn holds_entries(&self, cache: &str) -> bool;
}

/// The topology phase installed for a cache, and whether this member was admitted then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Installed {
    topology: u32,
    phase: Phase,
    admitted: bool,
}

/// One member's decisions. See the module documentation.
#[derive(Debug)]
pub struct Engine {
    me: MemberId,
    /// This process's consensus id: a member by the same name with another id is another
    /// process (its predecessor or successor).
    raft_id: u64,
    /// When this process last joined the agreed members (see [`ClusterState::joined`]).
    joined: Option<u64>,
    /// Whether this process was admitted yet.
    admitted: bool,
    /// Whether this process was the first by its name the cluster admitted: what it stored
    /// is merged into the cluster rather than discarded.
    first_of_name: bool,
    installed: HashMap<String, Installed>,
    /// Confirmations proposed, and when (milliseconds): (cache, rebalance, phase).
    confirmed: HashMap<(String, u32, Phase), u64>,
    /// Transfers under way and finished: (cache, rebalance).
    transfers_running: HashSet<(String, u32)>,
    transfers_done: HashSet<(String, u32)>,
    /// Caches whose stored entries are merged once their topology is stable, and those
    /// decided about already.
    reconcile: HashSet<String>,
    reconcile_checked: HashSet<String>,
    /// Caches whose unowned segments are merged by policy once their topology is stable
    /// (after this member was cut off and re-admitted).
    merge_pending: HashSet<String>,
}

impl Engine {
    /// The engine of the member named `me`, run by the process with consensus id `raft_id`.
    #[must_use]
    pub fn new(me: MemberId, raft_id: u64) -> Self {
        Self {
            me,
            raft_id,
            joined: None,
            admitted: false,
            first_of_name: false,
            installed: HashMap::new(),
            confirmed: HashMap::new(),
            transfers_running: HashSet::new(),
            transfers_done: HashSet::new(),
            reconcile: HashSet::new(),
            reconcile_checked: HashSet::new(),
            merge_pending: HashSet::new(),
        }
    }

    /// Whether this process has been admitted to the cluster (before, it takes no writes
    /// from primaries and owns nothing).
    #[must_use]
    pub fn admitted(&self) -> bool {
        self.admitted
    }

    /// Whether any state transfer of this member is under way.
    #[must_use]
    pub fn transferring_any(&self) -> bool {
        !self.transfers_running.is_empty()
    }

    /// Whether a transfer for `rebalance` of `cache` is under way.
    #[must_use]
    pub fn transferring(&self, cache: &str, rebalance: u32) -> bool {
        self.transfers_running
            .contains(&(cache.to_owned(), rebalance))
    }

    /// Decides what a newly agreed `state` means for this member, at `now_ms`.
    pub fn on_state(
        &mut self,
        state: &ClusterState,
        now_ms: u64,
        local: &dyn Local,
    ) -> Vec<Effect> {
        let mut effects = Vec::new();
        let joined = state
            .node(&self.me.0)
            .filter(|record| record.raft_id == self.raft_id)
            .and_then(|_| state.joined(&self.me.0));
        if self.joined.is_some() && self.joined != joined {
            effects.push(Effect::Fence);
        }
        let readmitted = joined.is_some() && self.joined != joined && self.admitted;
        self.joined = joined;
        if readmitted {
            // Back from a partition: what this member held of segments it will not own
            // goes through the merge policy once the topology is stable. The majority
            // re-admitted it in the state it now has, so its topologies are the agreed
            // ones and its caches are no longer DEGRADED (the merge needs their owners).
            self.merge_pending.extend(state.caches().keys().cloned());
            effects.extend(state.caches().keys().map(|cache| Effect::Available {
                cache: cache.clone(),
            }));
        }
        let admitted = joined.is_some();
        let first_admission = admitted && !self.admitted;
        self.admitted |= admitted;
        // The cluster had a process by this name before and went on without it: what this
        // process stored is older than what the cluster holds (keys removed since would
        // come back), so it starts empty and fetches what it owns.
        let discard = first_admission && state.incarnation(&self.me.0) > 1;
        if first_admission && !discard {
            self.first_of_name = true;
        }
        effects.push(Effect::Members);
        for (name, record) in state.caches() {
            if !local.has_cache(name) {
                effects.push(Effect::Create {
                    cache: name.clone(),
                });
            }
            if discard {
                effects.push(Effect::Discard {
                    cache: name.clone(),
                });
            }
            self.install(
                name,
                &record.topology,
                admitted,
                now_ms,
                local,
                &mut effects,
            );
        }
        let removed: Vec<String> = self
            .installed
            .keys()
            .filter(|name| state.cache(name).is_none())
            .cloned()
            .collect();
        for name in removed {
            // A cache defined again by the same name starts empty and moves every segment
            // afresh: nothing of its rebalances is remembered.
            self.installed.remove(&name);
            self.transfers_done.retain(|(cache, _)| *cache != name);
            self.transfers_running.retain(|(cache, _)| *cache != name);
            self.confirmed.retain(|(cache, _, _), _| *cache != name);
            self.reconcile.remove(&name);
            self.reconcile_checked.remove(&name);
            self.merge_pending.remove(&name);
            effects.push(Effect::Remove { cache: name });
        }
        effects
    }

    fn install(
        &mut self,
        name: &str,
        topology: &CacheTopology,
        admitted: bool,
        now_ms: u64,
        local: &dyn Local,
        effects: &mut Vec<Effect>,
    ) {
        let installed = Installed {
            topology: topology.id(),
            phase: topology.phase(),
            admitted,
        };
        if self.installed.get(name) == Some(&installed) {
            return;
        }
        let previous = self.installed.insert(name.to_owned(), installed);
        effects.push(Effect::Route {
            cache: name.to_owned(),
            topology: topology.clone(),
            exclude_me: !admitted,
        });
        if !admitted || !topology.members().contains(&self.me) {
            return;
        }
        if self.first_of_name
            && self.reconcile_checked.insert(name.to_owned())
            && local.holds_entries(name)
        {
            self.reconcile.insert(name.to_owned());
        }
        match topology.phase() {
            Phase::Stable => {
                let hash = topology.current().clone();
                if self.reconcile.remove(name) {
                    effects.push(Effect::Merge {
                        cache: name.to_owned(),
                        merge: Merge::All,
                        hash,
                    });
                } else if self.merge_pending.remove(name) {
                    effects.push(Effect::Merge {
                        cache: name.to_owned(),
                        merge: Merge::Unowned,
                        hash,
                    });
                } else if previous.is_some() {
                    effects.push(Effect::DropUnowned {
                        cache: name.to_owned(),
                        hash,
                    });
                }
            }
            Phase::ReadOldWriteAll => self.start_transfer(name, topology, now_ms, effects),
            phase @ (Phase::ReadAllWriteAll | Phase::ReadNewWriteAll) => {
                self.confirm(name, topology.rebalance_id(), phase, now_ms, effects);
            }
        }
    }

    /// A creation asked for by [`Effect::Create`] failed: the next state tries again.
    pub fn not_created(&mut self, cache: &str) {
        self.installed.remove(cache);
    }

    /// Decides, at `now_ms`, what keeps the rebalances this member takes part in moving: a
    /// transfer that failed starts again, a confirmation that may have been lost is proposed
    /// again. Call it periodically with the latest agreed state.
    pub fn on_tick(&mut self, state: &ClusterState, now_ms: u64) -> Vec<Effect> {
        let mut effects = Vec::new();
        for (name, record) in state.caches() {
            let topology = &record.topology;
            let current = self
                .installed
                .get(name)
                .is_some_and(|installed| installed.topology == topology.id());
            if topology.phase() == Phase::Stable
                || !current
                || !self.admitted
                || !topology.members().contains(&self.me)
                || topology.has_confirmed(&self.me)
            {
                continue;
            }
            match topology.phase() {
                Phase::ReadOldWriteAll => self.start_transfer(name, topology, now_ms, &mut effects),
                phase => self.confirm(name, topology.rebalance_id(), phase, now_ms, &mut effects),
            }
        }
        effects
    }

    /// A transfer asked for by [`Effect::Transfer`] ended: `complete` if every segment
    /// arrived, else it starts again at the next tick (while its rebalance lasts).
    pub fn transfer_finished(
        &mut self,
        cache: &str,
        rebalance: u32,
        complete: bool,
        now_ms: u64,
    ) -> Vec<Effect> {
        let mut effects = Vec::new();
        let key = (cache.to_owned(), rebalance);
        if !self.transfers_running.remove(&key) || !complete {
            return effects;
        }
        self.transfers_done
            .retain(|(_, r)| r.saturating_add(REBALANCES_KEPT) > rebalance);
        self.transfers_done.insert(key);
        self.confirm(
            cache,
            rebalance,
            Phase::ReadOldWriteAll,
            now_ms,
            &mut effects,
        );
        effects
    }

    /// Starts fetching what `topology` hands this member, unless a transfer for its
    /// rebalance runs or finished (then only the confirmation is due).
    fn start_transfer(
        &mut self,
        cache: &str,
        topology: &CacheTopology,
        now_ms: u64,
        effects: &mut Vec<Effect>,
    ) {
        let rebalance = topology.rebalance_id();
        let key = (cache.to_owned(), rebalance);
        if self.transfers_done.contains(&key) {
            self.confirm(cache, rebalance, Phase::ReadOldWriteAll, now_ms, effects);
            return;
        }
        if !self.transfers_running.insert(key) {
            return;
        }
        let segments = topology
            .to_fetch(&self.me)
            .into_iter()
            .filter_map(|segment| {
                // The segment's primary alone: it answers once it installed this rebalance,
                // so its snapshot misses no write (see `placement::FetchAnswer`). A backup's
                // could: the primary may still order writes by the route before, without
                // this member. A primary that is gone leaves the transfer unfinished; the
                // membership change restarts the rebalance with another.
                let sources = topology
                    .current()
                    .owner_ids(segment)
                    .into_iter()
                    .take(1)
                    .filter(|id| **id != self.me)
                    .cloned()
                    .collect();
                u32::try_from(segment)
                    .ok()
                    .map(|segment| (segment, sources))
            })
            .collect();
        effects.push(Effect::Transfer {
            cache: cache.to_owned(),
            rebalance,
            segments,
        });
    }

    /// Proposes that this member finished `phase` of `rebalance` — again if
    /// [`CONFIRM_RETRY_MS`] passed since the last proposal.
    fn confirm(
        &mut self,
        cache: &str,
        rebalance: u32,
        phase: Phase,
        now_ms: u64,
        effects: &mut Vec<Effect>,
    ) {
        let key = (cache.to_owned(), rebalance, phase);
        if self
            .confirmed
            .get(&key)
            .is_some_and(|&at| now_ms.saturating_sub(at) < CONFIRM_RETRY_MS)
        {
            return;
        }
        self.confirmed.insert(key, now_ms);
        self.confirmed
            .retain(|(_, r, _), _| r.saturating_add(REBALANCES_KEPT) > rebalance);
        effects.push(Effect::Propose(Command::Confirm {
            cache: cache.to_owned(),
            member: self.me.clone(),
            rebalance_id: rebalance,
            phase,
        }));
    }
}

/// Why a member sees a cache DEGRADED, given the members it can reach (itself included) and
/// the cache's segment owners as installed: it reaches no more than half of the topology's
/// members, or no reader of some segment. `None` if it is not.
#[must_use]
pub fn degraded_reason<'a>(
    members: &[MemberId],
    readers: impl IntoIterator<Item = &'a [MemberId]>,
    reachable: &dyn Fn(&MemberId) -> bool,
) -> Option<String> {
    let seen = members.iter().filter(|m| reachable(m)).count();
    if members.len() > 1 && seen * 2 <= members.len() {
        return Some(format!(
            "this node reaches {seen} of the {} members of its topology",
            members.len()
        ));
    }
    readers
        .into_iter()
        .position(|owners| !owners.iter().any(reachable))
        .map(|segment| format!("no owner of segment {segment} is reachable"))
}

#[cfg(test)]
mod tests;
