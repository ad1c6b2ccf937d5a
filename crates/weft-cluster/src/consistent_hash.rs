//! Consistent hashes: each segment's owners, primary first.
//!
//! A hash is built from a member list, a segment count and an owner count — from scratch,
//! or from the previous hash when membership changes. The rules, in priority order:
//!
//! 1. **Correct**: every segment has `min(owners, members)` distinct owners (every member in
//!    [`Mode::Replicated`]).
//! 2. **Balanced**: each member is the primary of `⌊S/M⌋` or `⌈S/M⌉` segments and owns
//!    `⌊S·n/M⌋` or `⌈S·n/M⌉` of them (S segments, M members, n owners per segment).
//! 3. **Few moves**: an owner of a segment in the previous hash keeps it when balance allows;
//!    a primary that must go is replaced by one of the segment's previous backups when one
//!    has room (no data moves); where no assignment of primaries to holders fits the quotas,
//!    the primary without the data goes to a segment that lost an owner anyway. So a member
//!    that joins receives segments and the others only lose some, and a member that leaves
//!    costs exactly its own copies, re-created on members that lack them.
//! 4. **Topology-aware**: a new backup is the member farthest from the segment's other owners
//!    (another site, else another rack, else another machine) among those with room; when a
//!    member must give up backups, it gives up first those on machines already owning them.
//!
//! Building is deterministic: the same inputs give the same hash on every node. Hashes in
//! transition — [`ConsistentHash::without`] the members that left, or the union of old and
//! new owners a topology keeps while segments move — may have fewer or more owners per
//! segment; [`ConsistentHash::rebalance`] from them restores the rules.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::member::{Member, MemberId};

/// How many members own each segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// `owners` members per segment (a primary and `owners - 1` backups).
    Distributed {
        /// Owners per segment, at least 1.
        owners: usize,
    },
    /// Every member owns every segment; primaries are still balanced.
    Replicated,
}

/// Inputs a consistent hash cannot be built from.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HashError {
    /// No members.
    #[error("a consistent hash needs at least one member")]
    NoMembers,
    /// No segments, or more than 65,536.
    #[error("the segment count must be between 1 and 65536, not {0}")]
    SegmentCount(usize),
    /// Zero owners.
    #[error("a distributed cache needs at least one owner per segment")]
    NoOwners,
    /// One id twice.
    #[error("member {0} is listed twice")]
    DuplicateMember(MemberId),
    /// More members than a hash indexes.
    #[error("a consistent hash holds at most 65535 members, not {0}")]
    TooManyMembers(usize),
}

/// Each segment's owners, as indexes into the member list; the first is the primary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsistentHash {
    mode: Mode,
    members: Vec<Member>,
    segments: Vec<Vec<u16>>,
}

const SEGMENTS_MAX: usize = 1 << 16;
const MEMBERS_MAX: usize = u16::MAX as usize;
/// How deep a search for a copy to hand over goes (each level is one segment).
const AUGMENT_DEPTH_MAX: usize = 256;

impl ConsistentHash {
    /// A hash built from scratch.
    ///
    /// # Errors
    /// [`HashError`] for no members, a bad segment count, zero owners or a duplicate id.
    pub fn new(members: Vec<Member>, segments: usize, mode: Mode) -> Result<Self, HashError> {
        Builder::new(members, segments, mode, None)?.build()
    }

    /// The hash for a new member list, keeping as much of this one as balance allows (same
    /// segment count and mode).
    ///
    /// # Errors
    /// [`HashError`] for no members or a duplicate id.
    pub fn rebalance(&self, members: Vec<Member>) -> Result<Self, HashError> {
        Builder::new(members, self.segments.len(), self.mode, Some(self))?.build()
    }

    /// This hash without the members in `gone`: their copies are dropped (a segment can be
    /// left with fewer owners, or none, and the primary role passes to the next owner). The
    /// owners that remain are unchanged, so reads and writes keep going where the data is
    /// while a rebalance restores the owner count.
    #[must_use]
    pub fn without(&self, gone: &[MemberId]) -> Self {
        let mut index = Vec::with_capacity(self.members.len());
        let mut members = Vec::new();
        for member in &self.members {
            if gone.contains(&member.id) {
                index.push(None);
            } else {
                index.push(u16::try_from(members.len()).ok());
                members.push(member.clone());
            }
        }
        let segments = self
            .segments
            .iter()
            .map(|owners| {
                owners
                    .iter()
                    .filter_map(|&o| index.get(usize::from(o)).copied().flatten())
                    .collect()
            })
            .collect();
        Self {
            mode: self.mode,
            members,
            segments,
        }
    }

    /// A hash with exactly these owners per segment (ids of `members`; unknown ids are
    /// left out). For topologies in transition, whose owners are whoever holds the data.
    #[must_use]
    pub(crate) fn from_owner_ids(
        members: Vec<Member>,
        mode: Mode,
        owners: &[Vec<MemberId>],
    ) -> Self {
        let segments = owners
            .iter()
            .map(|ids| {
                ids.iter()
                    .filter_map(|id| members.iter().position(|m| m.id == *id))
                    .filter_map(|i| u16::try_from(i).ok())
                    .collect()
            })
            .collect();
        Self {
            mode,
            members,
            segments,
        }
    }

    /// The owners of `segment` by id, primary first.
    #[must_use]
    pub fn owner_ids(&self, segment: usize) -> Vec<&MemberId> {
        self.owners(segment)
            .iter()
            .filter_map(|&o| self.members.get(usize::from(o)).map(|m| &m.id))
            .collect()
    }

    /// The members, in the order they were given.
    #[must_use]
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The number of segments.
    #[must_use]
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// The mode it was built for.
    #[must_use]
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The owners of `segment` (member indexes, primary first); empty past the last segment.
    #[must_use]
    pub fn owners(&self, segment: usize) -> &[u16] {
        self.segments.get(segment).map_or(&[], Vec::as_slice)
    }

    /// The primary owner of `segment`.
    #[must_use]
    pub fn primary(&self, segment: usize) -> Option<&Member> {
        let index = *self.owners(segment).first()?;
        self.members.get(usize::from(index))
    }

    /// The index of a member in [`ConsistentHash::members`].
    #[must_use]
    pub fn index_of(&self, id: &MemberId) -> Option<usize> {
        self.members.iter().position(|member| member.id == *id)
    }

    /// The segments `member` owns (primary or backup), ascending.
    #[must_use]
    pub fn segments_of(&self, member: usize) -> Vec<usize> {
        let Ok(member) = u16::try_from(member) else {
            return Vec::new();
        };
        (0..self.segments.len())
            .filter(|&s| self.segments[s].contains(&member))
            .collect()
    }

    /// The segments `member` is the primary of, ascending.
    #[must_use]
    pub fn primary_segments_of(&self, member: usize) -> Vec<usize> {
        let Ok(member) = u16::try_from(member) else {
            return Vec::new();
        };
        (0..self.segments.len())
            .filter(|&s| self.segments[s].first() == Some(&member))
            .collect()
    }
}

/// The fill's state, as the search for a copy to hand over changes it.
struct Search<'a> {
    owners: &'a mut [Vec<u16>],
    load: &'a mut [usize],
    quota: &'a [usize],
    /// Copies this build added: (segment, member).
    fresh: &'a mut Vec<(usize, u16)>,
    paired: &'a [Vec<u32>],
    seen: &'a mut [bool],
}

/// The primary assignment's state, as the search for a previous owner with room changes it.
struct Promotion<'a> {
    primary: &'a mut [Option<u16>],
    load: &'a mut [usize],
    quota: &'a [usize],
    seen: &'a mut [bool],
    seen_members: &'a mut [bool],
    /// Whether the search may end at a segment short of owners, whose primary then need
    /// not hold it.
    to_hole: bool,
}

impl Promotion<'_> {
    fn room(&self, m: u16) -> usize {
        self.quota[usize::from(m)] - self.load[usize::from(m)]
    }
}

/// The member with the most room (the first of those), leaving out `except`.
fn most_room(quota: &[usize], load: &[usize], except: &[u16]) -> Option<u16> {
    let room = |m: u16| quota[usize::from(m)] - load[usize::from(m)];
    (0..quota.len())
        .filter_map(|m| u16::try_from(m).ok())
        .filter(|&m| room(m) > 0 && !except.contains(&m))
        .max_by(|&a, &b| room(a).cmp(&room(b)).then(b.cmp(&a)))
}

/// The state of one build.
struct Builder {
    mode: Mode,
    members: Vec<Member>,
    segment_count: usize,
    /// Owners per segment.
    wanted: usize,
    /// Per segment, the previous owners still members (new indexes), previous order.
    kept: Vec<Vec<u16>>,
    /// Per member, the segments it owned before.
    kept_by: Vec<Vec<usize>>,
}

impl Builder {
    fn new(
        members: Vec<Member>,
        segment_count: usize,
        mode: Mode,
        previous: Option<&ConsistentHash>,
    ) -> Result<Self, HashError> {
        if members.is_empty() {
            return Err(HashError::NoMembers);
        }
        if members.len() > MEMBERS_MAX {
            return Err(HashError::TooManyMembers(members.len()));
        }
        if segment_count == 0 || segment_count > SEGMENTS_MAX {
            return Err(HashError::SegmentCount(segment_count));
        }
        let wanted = match mode {
            Mode::Distributed { owners: 0 } => return Err(HashError::NoOwners),
            Mode::Distributed { owners } => owners.min(members.len()),
            Mode::Replicated => members.len(),
        };
        let mut index: HashMap<&MemberId, u16> = HashMap::with_capacity(members.len());
        for (i, member) in members.iter().enumerate() {
            // Bounded by MEMBERS_MAX above.
            let i = u16::try_from(i).unwrap_or(u16::MAX);
            if index.insert(&member.id, i).is_some() {
                return Err(HashError::DuplicateMember(member.id.clone()));
            }
        }
        let kept = match previous {
            Some(previous) => previous
                .segments
                .iter()
                .map(|owners| {
                    owners
                        .iter()
                        .filter_map(|&old| {
                            let member = previous.members.get(usize::from(old))?;
                            index.get(&member.id).copied()
                        })
                        .collect()
                })
                .collect(),
            None => vec![Vec::new(); segment_count],
        };
        drop(index);
        let mut kept_by = vec![Vec::new(); members.len()];
        for (s, owners) in kept.iter().enumerate() {
            for &m in owners {
                kept_by[usize::from(m)].push(s);
            }
        }
        Ok(Self {
            mode,
            members,
            segment_count,
            wanted,
            kept,
            kept_by,
        })
    }

    fn build(self) -> Result<ConsistentHash, HashError> {
        let primaries = self.primaries();
        let segments = if self.mode == Mode::Replicated {
            let all = u16::try_from(self.members.len()).unwrap_or(u16::MAX);
            primaries
                .iter()
                .map(|&primary| {
                    std::iter::once(primary)
                        .chain((0..all).filter(|&m| m != primary))
                        .collect()
                })
                .collect()
        } else {
            self.backups(&primaries)
        };
        Ok(ConsistentHash {
            mode: self.mode,
            members: self.members,
            segments,
        })
    }

    /// Per member, how many of `total` units it gets: `⌊total/M⌋`, at least `floor[m]`, and
    /// one more for `total mod M` of them: first those that keep more than the smaller share
    /// (`kept`, most first: each saves giving one up and copying it elsewhere), then those
    /// that keep least (a member that joins receives, rather than every member a little),
    /// then by index.
    fn quotas(&self, total: usize, kept: &[usize], floor: &[usize]) -> Vec<usize> {
        let count = self.members.len();
        let base = total / count;
        let mut quota: Vec<usize> = floor.iter().map(|&f| f.max(base)).collect();
        let mut extra = (total - base * count).saturating_sub(
            floor.iter().filter(|&&f| f > base).count(), // already given their one more
        );
        let mut order: Vec<usize> = (0..count).filter(|&m| quota[m] == base).collect();
        order.sort_by_key(|&m| {
            let surplus = kept[m] > base;
            let order = if surplus {
                usize::MAX - kept[m]
            } else {
                kept[m]
            };
            (!surplus, order, m)
        });
        for m in order {
            if extra == 0 {
                break;
            }
            quota[m] += 1;
            extra -= 1;
        }
        quota
    }

    /// The primary of every segment.
    fn primaries(&self) -> Vec<u16> {
        let count = self.members.len();
        let mut kept_primary = vec![0usize; count];
        for owners in &self.kept {
            if let Some(&p) = owners.first() {
                kept_primary[usize::from(p)] += 1;
            }
        }
        let quota = self.quotas(self.segment_count, &kept_primary, &vec![0; count]);
        let mut load = vec![0usize; count];
        let mut primary: Vec<Option<u16>> = vec![None; self.segment_count];
        // Keep previous primaries that are still members, up to their quota.
        for (s, owners) in self.kept.iter().enumerate() {
            if let Some(&p) = owners.first()
                && load[usize::from(p)] < quota[usize::from(p)]
            {
                primary[s] = Some(p);
                load[usize::from(p)] += 1;
            }
        }
        // Promote a previous backup with room (its data is there) — if need be making room
        // by handing another segment's primary role to one of that segment's own backups.
        // Failing that, a segment must take a primary without its data: along the same kind
        // of path, one that lost an owner anyway (its new copy is due regardless), else this
        // one (one copy more than the membership change needs).
        for s in 0..self.segment_count {
            if primary[s].is_some() {
                continue;
            }
            let mut done = false;
            for to_hole in [false, true] {
                let mut promotion = Promotion {
                    primary: &mut primary,
                    load: &mut load,
                    quota: &quota,
                    seen: &mut vec![false; self.segment_count],
                    seen_members: &mut vec![false; count],
                    to_hole,
                };
                if self.promote(s, &mut promotion, 0) {
                    done = true;
                    break;
                }
            }
            if done {
                continue;
            }
            let chosen = most_room(&quota, &load, &[]).unwrap_or(0);
            primary[s] = Some(chosen);
            load[usize::from(chosen)] += 1;
        }
        primary.into_iter().map(|p| p.unwrap_or(0)).collect()
    }

    /// Makes one of `s`'s previous owners its primary: one with room, or one that gives up
    /// the primary role of another segment `t` it owned before, which then goes the same way
    /// to one of `t`'s previous owners (recursively, each segment and member once, bounded
    /// depth; an augmenting path as in bipartite matching). No data moves: every primary
    /// chosen already holds the segment — but for the segment a `to_hole` search ends at,
    /// one with fewer previous owners than it needs, whose primary is a member with room.
    fn promote(&self, s: usize, p: &mut Promotion<'_>, depth: usize) -> bool {
        p.seen[s] = true;
        let direct = self.kept[s]
            .iter()
            .copied()
            .filter(|&m| p.room(m) > 0)
            .max_by(|&a, &b| p.room(a).cmp(&p.room(b)).then(b.cmp(&a)));
        let hole = || p.to_hole && self.kept[s].len() < self.wanted;
        let chosen = direct.or_else(|| {
            hole()
                .then(|| most_room(p.quota, p.load, &self.kept[s]))
                .flatten()
        });
        if let Some(m) = chosen {
            p.primary[s] = Some(m);
            p.load[usize::from(m)] += 1;
            return true;
        }
        if depth >= AUGMENT_DEPTH_MAX {
            return false;
        }
        for &m in &self.kept[s] {
            // A member's segments are tried once per search (as in bipartite matching).
            if std::mem::replace(&mut p.seen_members[usize::from(m)], true) {
                continue;
            }
            for &t in &self.kept_by[usize::from(m)] {
                // A segment only `m` held can pass its role on only as a hole.
                let passes = self.kept[t].len() >= 2 || (p.to_hole && self.wanted > 1);
                if p.seen[t] || p.primary[t] != Some(m) || !passes {
                    continue;
                }
                p.primary[t] = None;
                p.primary[s] = Some(m);
                if self.promote(t, p, depth + 1) {
                    return true;
                }
                p.primary[s] = None;
                p.primary[t] = Some(m);
            }
        }
        false
    }

    /// Every segment's owners: its primary, then backups.
    fn backups(&self, primaries: &[u16]) -> Vec<Vec<u16>> {
        let count = self.members.len();
        let n = self.wanted;
        let mut primary_load = vec![0usize; count];
        for &p in primaries {
            primary_load[usize::from(p)] += 1;
        }
        let total = self.segment_count * n;
        let mut kept_load = vec![0usize; count];
        for owners in &self.kept {
            for &m in owners {
                kept_load[usize::from(m)] += 1;
            }
        }
        // Keep previous owners as backups. Where a segment has more than room for (its new
        // primary took a place), keep those that spread it over machines, then those that
        // keep least elsewhere (they are the ones that would need copies).
        let mut load = primary_load.clone();
        let mut owners: Vec<Vec<u16>> = primaries.iter().map(|&p| vec![p]).collect();
        for s in 0..self.segment_count {
            let mut candidates: Vec<u16> = self.kept[s]
                .iter()
                .copied()
                .filter(|m| !owners[s].contains(m))
                .collect();
            if candidates.len() > n - 1 {
                let primary = [primaries[s]];
                candidates.sort_by_key(|&m| {
                    (
                        self.nearest(&primary, m) == 0,
                        kept_load[usize::from(m)],
                        self.kept[s].iter().position(|&k| k == m),
                    )
                });
                // Those left out keep less elsewhere from now on.
                for &dropped in &candidates[n - 1..] {
                    kept_load[usize::from(dropped)] -= 1;
                }
                candidates.truncate(n - 1);
            }
            for m in candidates {
                owners[s].push(m);
                load[usize::from(m)] += 1;
            }
        }
        // The members keeping most get the larger share; the others give back what they keep
        // beyond theirs: worst-spread copies first, then copies of segments that a member with
        // room can take (so what is given back goes where it is needed).
        let quota = self.quotas(total, &load, &primary_load);
        let mut holes = vec![0usize; self.segment_count];
        for m in 0..count {
            let Ok(member) = u16::try_from(m) else {
                continue;
            };
            let excess = load[m].saturating_sub(quota[m]);
            if excess == 0 {
                continue;
            }
            let fillers = |s: usize, owners: &[Vec<u16>], load: &[usize]| {
                (0..count)
                    .filter(|&o| load[o] < quota[o])
                    .filter_map(|o| u16::try_from(o).ok())
                    .filter(|o| !owners[s].contains(o))
                    .count()
            };
            for _ in 0..excess {
                let drop = (0..self.segment_count)
                    .filter(|&s| owners[s][1..].contains(&member))
                    .max_by_key(|&s| {
                        let others: Vec<u16> =
                            owners[s].iter().copied().filter(|&o| o != member).collect();
                        let spare = fillers(s, &owners, &load).saturating_sub(holes[s]);
                        (
                            std::cmp::Reverse(self.nearest(&others, member)),
                            spare > 0,
                            std::cmp::Reverse(holes[s]),
                            s,
                        )
                    });
                let Some(s) = drop else { break };
                owners[s].retain(|&o| o != member);
                holes[s] += 1;
                load[m] -= 1;
            }
        }

        // Backups kept stay in their previous order (the spread-first pass may have taken
        // them out of it), so an unchanged membership gives an identical hash.
        for (s, list) in owners.iter_mut().enumerate() {
            let position = |m: &u16| self.kept[s].iter().position(|k| k == m);
            list[1..].sort_by_key(position);
        }

        // Fill the rest with the farthest member that has room, then the one with most room;
        // the segments fewest members can take first, so none is left without a taker.
        let mut open: Vec<usize> = (0..self.segment_count)
            .filter(|&s| owners[s].len() < n)
            .collect();
        open.sort_by_cached_key(|&s| {
            let takers = (0..count)
                .filter(|&m| load[m] < quota[m])
                .filter_map(|m| u16::try_from(m).ok())
                .filter(|m| !owners[s].contains(m))
                .count();
            (takers, s)
        });
        // Copies this build adds: (segment, member).
        let mut fresh: Vec<(usize, u16)> = Vec::new();
        let mut paired = vec![vec![0u32; count]; count];
        for list in &owners {
            for &backup in &list[1..] {
                paired[usize::from(list[0])][usize::from(backup)] += 1;
            }
        }
        for s in open {
            while owners[s].len() < n {
                if let Some(m) = self.best_taker(s, &owners, &load, &quota, &paired) {
                    owners[s].push(m);
                    load[usize::from(m)] += 1;
                    fresh.push((s, m));
                    paired[usize::from(owners[s][0])][usize::from(m)] += 1;
                    continue;
                }
                // Every member with room owns `s` already: hand one of this build's copies
                // to another member so that its holder can take `s` (an augmenting path, so
                // nothing more is copied), else exchange a kept backup.
                let mut seen = vec![false; self.segment_count];
                let mut search = Search {
                    owners: &mut owners,
                    load: &mut load,
                    quota: &quota,
                    fresh: &mut fresh,
                    paired: &paired,
                    seen: &mut seen,
                };
                if self.augment(s, &mut search, 0) {
                    continue;
                }
                let chosen = self.make_room(s, &mut owners, &mut load, &quota);
                owners[s].push(chosen);
                load[usize::from(chosen)] += 1;
                fresh.push((s, chosen));
            }
        }
        owners
    }

    /// The member with room that should take a copy of `s`: the farthest from its owners,
    /// then the one backing up `s`'s primary least often (`paired[primary][member]`:
    /// spreading each primary's backups over every member spreads the work when it leaves),
    /// then the one with most room, then the first.
    fn best_taker(
        &self,
        s: usize,
        owners: &[Vec<u16>],
        load: &[usize],
        quota: &[usize],
        paired: &[Vec<u32>],
    ) -> Option<u16> {
        let pairs = &paired[usize::from(owners[s][0])];
        (0..self.members.len())
            .filter_map(|m| u16::try_from(m).ok())
            .filter(|m| !owners[s].contains(m) && load[usize::from(*m)] < quota[usize::from(*m)])
            .max_by(|&a, &b| {
                let room = |m: u16| quota[usize::from(m)] - load[usize::from(m)];
                self.nearest(&owners[s], a)
                    .cmp(&self.nearest(&owners[s], b))
                    .then(pairs[usize::from(b)].cmp(&pairs[usize::from(a)]))
                    .then(room(a).cmp(&room(b)))
                    .then(b.cmp(&a))
            })
    }

    /// Gives `s` one more owner by moving a copy this build added: a member `m` that does not
    /// own `s` leaves a segment `t` it was given, takes `s`, and `t` is filled again the same
    /// way (recursively, each segment visited once, at most `AUGMENT_DEPTH_MAX` deep). Loads
    /// do not change but for the member with room found at the end.
    fn augment(&self, s: usize, search: &mut Search<'_>, depth: usize) -> bool {
        search.seen[s] = true;
        if let Some(m) = self.best_taker(s, search.owners, search.load, search.quota, search.paired)
        {
            search.owners[s].push(m);
            search.load[usize::from(m)] += 1;
            search.fresh.push((s, m));
            return true;
        }
        if depth >= AUGMENT_DEPTH_MAX {
            return false;
        }
        for i in 0..search.fresh.len() {
            let (t, m) = search.fresh[i];
            if search.seen[t] || search.owners[s].contains(&m) {
                continue;
            }
            search.owners[t].retain(|&o| o != m);
            search.owners[s].push(m);
            search.fresh[i] = (s, m);
            if self.augment(t, search, depth + 1) {
                return true;
            }
            search.owners[s].pop();
            search.owners[t].push(m);
            search.fresh[i] = (t, m);
        }
        false
    }

    /// Distance from `m` to the nearest of `owners` (3 when there are none).
    fn nearest(&self, owners: &[u16], m: u16) -> u8 {
        owners
            .iter()
            .map(|&o| self.members[usize::from(o)].distance(&self.members[usize::from(m)]))
            .min()
            .unwrap_or(3)
    }

    /// Segment `s` needs an owner but every member with room already owns it: move a backup
    /// `x` of another segment `t` (one that does not own `s`) to `s`, and give `t` to a member
    /// `c` with room (one more copy than needed). Loads stay within quota. Returns `x` (the caller counts it; its load is lowered here for the segment it
    /// gives up). Falls back to the least loaded non-owner, over quota, if no exchange
    /// exists (tiny clusters only).
    fn make_room(
        &self,
        s: usize,
        owners: &mut [Vec<u16>],
        load: &mut [usize],
        quota: &[usize],
    ) -> u16 {
        let count = self.members.len();
        let with_room: Vec<u16> = (0..count)
            .filter_map(|m| u16::try_from(m).ok())
            .filter(|&m| load[usize::from(m)] < quota[usize::from(m)])
            .collect();
        let slots: Vec<(usize, usize)> = (0..owners.len())
            .flat_map(|t| (1..owners[t].len()).map(move |slot| (t, slot)))
            .collect();
        for (t, slot) in slots {
            if t == s {
                continue;
            }
            let x = owners[t][slot];
            if owners[s].contains(&x) {
                continue;
            }
            if let Some(&c) = with_room.iter().find(|c| !owners[t].contains(c)) {
                owners[t][slot] = c;
                load[usize::from(c)] += 1;
                load[usize::from(x)] -= 1;
                return x;
            }
        }
        (0..count)
            .filter_map(|m| u16::try_from(m).ok())
            .filter(|m| !owners[s].contains(m))
            .min_by_key(|&m| (load[usize::from(m)], m))
            .unwrap_or(0)
    }
}
