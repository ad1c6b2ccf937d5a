//! A cache's topology and how it changes: the consistent hash in force, the one being moved
//! to, and the phase of the move.
//!
//! When membership changes, the members that left are dropped from the current hash at once
//! (their copies are gone) and a rebalance starts toward a balanced hash of the live members.
//! Segments move in phases, so that no write acknowledged by its owners is lost and none is
//! read from a node that has not received it:
//!
//! 1. [`Phase::ReadOldWriteAll`]: new owners fetch their segments from current owners;
//!    reads go to current owners, writes to current and new owners.
//! 2. [`Phase::ReadAllWriteAll`]: every new owner has its segments; reads may go to either.
//! 3. [`Phase::ReadNewWriteAll`]: reads go to new owners; writes still reach both, so a
//!    node still serving an older phase sees them.
//! 4. [`Phase::Stable`]: the new hash is the current one; old owners drop what they no
//!    longer own.
//!
//! Each phase ends when every live member has confirmed it (for the first, that its
//! transfers are done). A membership change during a move restarts it from the hash whose
//! owners are known to hold the data. Every change increments the topology id, which clients
//! and nodes compare to know they are up to date.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::consistent_hash::{ConsistentHash, HashError};
use crate::member::{Member, MemberId};

/// Where a rebalance is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Phase {
    /// No rebalance: one hash.
    Stable,
    /// New owners are fetching their segments.
    ReadOldWriteAll,
    /// Every new owner holds its segments; reads may use either hash.
    ReadAllWriteAll,
    /// Reads use the new hash; writes still reach both.
    ReadNewWriteAll,
}

/// One cache's topology.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheTopology {
    id: u32,
    rebalance_id: u32,
    phase: Phase,
    current: ConsistentHash,
    pending: Option<ConsistentHash>,
    /// Members that confirmed the current phase of the current rebalance.
    confirmed: BTreeSet<MemberId>,
    /// Segments that lost every copy with members that left (they start empty at their new
    /// owners), not yet merged back by a member that held them and returns: the only ones
    /// where what a member back from a partition holds may fill in what the cluster lacks.
    /// Everywhere else the members that stayed hold the segment, and their copy — an absence
    /// included — is the truth.
    #[serde(default)]
    lost: BTreeSet<u32>,
}

impl CacheTopology {
    /// The first topology, stable on `hash`.
    #[must_use]
    pub fn new(hash: ConsistentHash) -> Self {
        Self {
            id: 1,
            rebalance_id: 0,
            phase: Phase::Stable,
            current: hash,
            pending: None,
            confirmed: BTreeSet::new(),
            lost: BTreeSet::new(),
        }
    }

    /// Segments that lost every copy and were not merged back since (see the field).
    #[must_use]
    pub fn lost(&self) -> &BTreeSet<u32> {
        &self.lost
    }

    /// A member back from a partition merged what it held of `segments` into the cluster:
    /// they are no longer lost. Returns whether that changed anything.
    pub fn merged(&mut self, segments: &[u32]) -> bool {
        let before = self.lost.len();
        self.lost.retain(|segment| !segments.contains(segment));
        self.lost.len() != before
    }

    /// The topology id: it grows with every change.
    #[must_use]
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The id of the rebalance in progress (or the last one).
    #[must_use]
    pub fn rebalance_id(&self) -> u32 {
        self.rebalance_id
    }

    /// The phase.
    #[must_use]
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The hash in force.
    #[must_use]
    pub fn current(&self) -> &ConsistentHash {
        &self.current
    }

    /// The hash being moved to, during a rebalance.
    #[must_use]
    pub fn pending(&self) -> Option<&ConsistentHash> {
        self.pending.as_ref()
    }

    /// The members that must confirm the phase: the live ones.
    #[must_use]
    pub fn members(&self) -> Vec<MemberId> {
        let hash = self.pending.as_ref().unwrap_or(&self.current);
        hash.members().iter().map(|m| m.id.clone()).collect()
    }

    /// Where reads of `segment` may go, primary first.
    #[must_use]
    pub fn read_owners(&self, segment: usize) -> Vec<MemberId> {
        let old = || self.current.owner_ids(segment);
        let new = || {
            self.pending
                .as_ref()
                .map(|p| p.owner_ids(segment))
                .unwrap_or_default()
        };
        let ids: Vec<&MemberId> = match self.phase {
            Phase::Stable | Phase::ReadOldWriteAll => old(),
            Phase::ReadAllWriteAll => union(old(), new()),
            Phase::ReadNewWriteAll => new(),
        };
        ids.into_iter().cloned().collect()
    }

    /// Where writes of `segment` must go (the primary first: the one that orders them).
    #[must_use]
    pub fn write_owners(&self, segment: usize) -> Vec<MemberId> {
        let old = self.current.owner_ids(segment);
        let ids = match (&self.pending, self.phase) {
            (Some(pending), Phase::ReadNewWriteAll) => union(pending.owner_ids(segment), old),
            (Some(pending), _) => union(old, pending.owner_ids(segment)),
            (None, _) => old,
        };
        ids.into_iter().cloned().collect()
    }

    /// What `member` must fetch in the current rebalance: segments it owns in the pending
    /// hash but not in the current one (empty outside [`Phase::ReadOldWriteAll`]).
    #[must_use]
    pub fn to_fetch(&self, member: &MemberId) -> Vec<usize> {
        let Some(pending) = &self.pending else {
            return Vec::new();
        };
        if self.phase != Phase::ReadOldWriteAll {
            return Vec::new();
        }
        (0..pending.segment_count())
            .filter(|&s| {
                pending.owner_ids(s).contains(&member)
                    && !self.current.owner_ids(s).contains(&member)
            })
            .collect()
    }

    /// Membership changed to `live`: members gone are dropped from the current hash at once
    /// and a rebalance toward a balanced hash of `live` starts (or restarts). A move under way
    /// restarts from every member known to hold each segment: its current owners and the new
    /// owners that finished fetching it. Returns whether the topology changed.
    ///
    /// # Errors
    /// [`HashError::NoMembers`] when nobody is left.
    pub fn members_changed(&mut self, live: &[Member]) -> Result<bool, HashError> {
        let live_ids: BTreeSet<&MemberId> = live.iter().map(|m| &m.id).collect();
        let known: BTreeSet<MemberId> = self.members().into_iter().collect();
        if known.len() == live_ids.len() && known.iter().all(|id| live_ids.contains(id)) {
            return Ok(false);
        }
        let merged;
        let base = match &self.pending {
            None => &self.current,
            Some(pending) => {
                // Who holds each segment's data: its current owners (they receive every
                // write until the move ends) and the new owners that have it — all of them
                // once the first phase ended, those that confirmed their transfers before.
                // Keeping them all as owners means a crash of some loses nothing the others
                // hold, and the next rebalance moves less.
                let fetched = |id: &MemberId| {
                    self.phase != Phase::ReadOldWriteAll || self.confirmed.contains(id)
                };
                let new_first = self.phase != Phase::ReadOldWriteAll;
                let owners: Vec<Vec<MemberId>> = (0..pending.segment_count())
                    .map(|s| {
                        let old = self.current.owner_ids(s);
                        let new: Vec<&MemberId> = pending
                            .owner_ids(s)
                            .into_iter()
                            .filter(|id| fetched(id))
                            .collect();
                        let (first, second) = if new_first { (new, old) } else { (old, new) };
                        let mut ids: Vec<MemberId> = first.into_iter().cloned().collect();
                        for id in second {
                            if !ids.contains(id) {
                                ids.push(id.clone());
                            }
                        }
                        ids
                    })
                    .collect();
                merged = ConsistentHash::from_owner_ids(
                    pending.members().to_vec(),
                    pending.mode(),
                    &owners,
                );
                &merged
            }
        };
        let gone: Vec<MemberId> = base
            .members()
            .iter()
            .map(|m| m.id.clone())
            .filter(|id| !live_ids.contains(id))
            .collect();
        let current = base.without(&gone);
        for segment in 0..base.segment_count() {
            if !base.owner_ids(segment).is_empty()
                && current.owner_ids(segment).is_empty()
                && let Ok(segment) = u32::try_from(segment)
            {
                self.lost.insert(segment);
            }
        }
        let target = current.rebalance(live.to_vec())?;
        self.id += 1;
        self.rebalance_id += 1;
        self.confirmed.clear();
        if target == current {
            self.current = current;
            self.pending = None;
            self.phase = Phase::Stable;
        } else {
            self.current = current;
            self.pending = Some(target);
            self.phase = Phase::ReadOldWriteAll;
        }
        Ok(true)
    }

    /// Whether `member` confirmed the current phase.
    #[must_use]
    pub fn has_confirmed(&self, member: &MemberId) -> bool {
        self.confirmed.contains(member)
    }

    /// `member` confirms the phase of rebalance `rebalance_id` (for the first phase: its
    /// transfers are done). When every live member has, the next phase starts. Confirmations
    /// of another rebalance, or from a non-member, are ignored. Returns whether the topology
    /// changed.
    pub fn confirm(&mut self, member: &MemberId, rebalance_id: u32) -> bool {
        if rebalance_id != self.rebalance_id || self.phase == Phase::Stable {
            return false;
        }
        let members = self.members();
        if !members.contains(member) {
            return false;
        }
        self.confirmed.insert(member.clone());
        if !members.iter().all(|m| self.confirmed.contains(m)) {
            return false;
        }
        self.confirmed.clear();
        self.id += 1;
        self.phase = match self.phase {
            Phase::ReadOldWriteAll => Phase::ReadAllWriteAll,
            Phase::ReadAllWriteAll => Phase::ReadNewWriteAll,
            Phase::ReadNewWriteAll | Phase::Stable => {
                if let Some(pending) = self.pending.take() {
                    self.current = pending;
                }
                Phase::Stable
            }
        };
        true
    }
}

/// `first` then the members of `second` not in it.
fn union<'a>(mut first: Vec<&'a MemberId>, second: Vec<&'a MemberId>) -> Vec<&'a MemberId> {
    for id in second {
        if !first.contains(&id) {
            first.push(id);
        }
    }
    first
}
