//! Where a keyed request runs: each segment's owners in the topology a member installed,
//! and the one placement function every path (the grid's routing, the simulator) uses.

use crate::MemberId;
use crate::topology::{CacheTopology, Phase};

/// One segment's owners in the installed topology.
#[derive(Debug, Clone, Default)]
pub struct SegmentRoute {
    /// Members reads may go to, primary first.
    pub read: Vec<MemberId>,
    /// Members every write must reach; the first orders them.
    pub write: Vec<MemberId>,
    /// The first write owner hands the ordering of the segment's writes over to another
    /// member at the next phase ([`Phase::ReadAllWriteAll`], the primary changes): it
    /// takes no new write meanwhile, so that what it ordered reaches every owner before the
    /// next primary orders any (see [`SegmentRoute::orders`]).
    pub hands_over: bool,
}

impl SegmentRoute {
    /// Whether `member` orders the segment's writes now: it is the first write owner and
    /// is not handing the segment over. Writes that reach any other member are refused
    /// there, and their senders route them again.
    #[must_use]
    pub fn orders(&self, member: &MemberId) -> bool {
        !self.hands_over && self.write.first() == Some(member)
    }
}

/// A clustered cache's installed topology.
#[derive(Debug)]
pub struct CacheRoute {
    /// The topology.
    pub topology: CacheTopology,
    /// Per segment.
    pub segments: Vec<SegmentRoute>,
    /// Whether a read runs on the member it arrives at when that member holds the key:
    /// always for a replicated cache, for a distributed one when it opts in (its `reads`
    /// setting).
    pub reads_any_owner: bool,
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
                hands_over: topology.phase() == Phase::ReadAllWriteAll
                    && topology.pending().is_some_and(|pending| {
                        pending.owner_ids(segment).first()
                            != topology.current().owner_ids(segment).first()
                    }),
            })
            .collect();
        let reads_any_owner = topology.current().mode() == crate::Mode::Replicated;
        Self {
            topology,
            segments,
            reads_any_owner,
        }
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

/// The member that runs a request on `segment`, as `local` sees `route` (`None`: nobody is
/// known, so it runs on `local` and fails there if it must).
///
/// A write runs on the member that orders the segment's writes (its first write owner). So
/// does a read of a distributed cache: that member answers a read only once the writes it
/// may have seen are on every owner (the read barrier of a synchronous cache), so no later
/// read sees an older value — reads are linearizable. Reading any owner instead would let a
/// backup still applying a write answer with the value before it, after the primary
/// answered with the new one.
///
/// A read of a replicated cache — or of a distributed cache that opted in
/// ([`CacheRoute::reads_any_owner`]) — runs on `local` if it holds the segment (a replicated
/// cache's every member, once it fetched it), as Infinispan's replicated caches do: adding
/// members adds read capacity. What that gives up: a read concurrent with a write may see
/// the old value on one member after another member answered with the new one. A write is
/// still acknowledged only once every owner applied it (sync), so a read that starts after
/// a write's acknowledgement sees it wherever it runs.
#[must_use]
pub fn place<'a>(
    route: &'a CacheRoute,
    local: &'a MemberId,
    segment: u32,
    read: bool,
) -> Option<&'a MemberId> {
    let owners = route.segment(segment)?;
    if read && route.reads_any_owner {
        if owners.read.contains(local) {
            return Some(local);
        }
        return owners.read.first();
    }
    owners.write.first()
}

/// What a member answers a new owner asking for the entries of `segment` in rebalance
/// `rebalance`, given the route it installed (`None`: none yet) and its own id `me`.
///
/// This is the fence that makes a state transfer lose no write. A segment's writes are
/// ordered by its primary, which applies each under the segment's lock and reads its
/// installed route there to know where to replicate it. So once the primary has installed
/// the rebalance — in which the new owner is a write owner — a snapshot it takes holds every
/// write it applied before (under the old route, and so sent to the old owners only), and
/// every write it applies after reaches the new owner by replication; and, holding that
/// route, it applies no change a former primary still sends (a member applies changes only
/// from the primary of its own topology). A snapshot from a member that has not installed
/// the rebalance yet, or from one that does not order the segment's writes, could miss a
/// write acknowledged after it: the old primary's, or its own under the route before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchAnswer {
    /// Send the segment's entries now.
    Serve,
    /// Not yet: this member has not installed the rebalance; answer once it has.
    Wait,
    /// A newer rebalance replaced the asker's: its transfer is over.
    Stale,
    /// This member does not order the segment's writes in the rebalance: ask the one that does.
    NotPrimary,
}

/// See [`FetchAnswer`].
#[must_use]
pub fn fetch_answer(
    route: Option<&CacheRoute>,
    me: &MemberId,
    segment: u32,
    rebalance: u32,
) -> FetchAnswer {
    let Some(route) = route else {
        return FetchAnswer::Wait;
    };
    let installed = route.topology.rebalance_id();
    if installed < rebalance {
        return FetchAnswer::Wait;
    }
    if installed > rebalance {
        return FetchAnswer::Stale;
    }
    match route.segment(segment) {
        Some(owners) if owners.write.first() == Some(me) => FetchAnswer::Serve,
        _ => FetchAnswer::NotPrimary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ConsistentHash, Member, Mode};

    fn route(mode: Mode) -> CacheRoute {
        let members: Vec<Member> = ["a", "b", "c"]
            .iter()
            .map(|name| Member {
                id: MemberId((*name).to_owned()),
                location: crate::Location::default(),
            })
            .collect();
        let hash = ConsistentHash::new(members, 6, mode);
        let Ok(hash) = hash else {
            panic!("a hash of three members")
        };
        CacheRoute::new(CacheTopology::new(hash))
    }

    // Proves writes and distributed reads run at the primary; replicated reads, and
    // distributed reads that opted in, run on an owner they arrive at, else the primary.
    #[test]
    fn reads_run_at_the_primary_unless_any_owner_may_answer() {
        let mut distributed = route(Mode::Distributed { owners: 2 });
        for segment in 0..6 {
            let owners = distributed.segments[segment as usize].write.clone();
            let backup = &owners[1];
            let primary = &owners[0];
            assert_eq!(place(&distributed, backup, segment, false), Some(primary));
            assert_eq!(place(&distributed, backup, segment, true), Some(primary));
        }
        distributed.reads_any_owner = true;
        for segment in 0..6 {
            let owners = distributed.segments[segment as usize].write.clone();
            assert_eq!(
                place(&distributed, &owners[1], segment, true),
                Some(&owners[1])
            );
            assert_eq!(
                place(&distributed, &owners[1], segment, false),
                Some(&owners[0])
            );
            let outsider = ["a", "b", "c"]
                .iter()
                .map(|name| MemberId((*name).to_owned()))
                .find(|member| !owners.contains(member));
            if let Some(outsider) = outsider {
                assert_eq!(
                    place(&distributed, &outsider, segment, true),
                    Some(&owners[0])
                );
            }
        }
        let replicated = route(Mode::Replicated);
        assert!(replicated.reads_any_owner);
        let c = MemberId("c".to_owned());
        for segment in 0..6 {
            assert_eq!(place(&replicated, &c, segment, true), Some(&c));
        }
    }

    // Proves a segment is served only by its primary, and only once it installed the
    // asker's rebalance: not before (wait), nor for a replaced one (stale).
    #[test]
    fn a_segment_is_served_by_its_primary_once_it_installed_the_rebalance() {
        let route = route(Mode::Distributed { owners: 2 });
        let installed = route.topology.rebalance_id();
        for segment in 0..6 {
            let owners = route.segments[segment as usize].write.clone();
            let (primary, backup) = (&owners[0], &owners[1]);
            assert_eq!(
                fetch_answer(Some(&route), primary, segment, installed),
                FetchAnswer::Serve
            );
            assert_eq!(
                fetch_answer(Some(&route), backup, segment, installed),
                FetchAnswer::NotPrimary
            );
            assert_eq!(
                fetch_answer(Some(&route), primary, segment, installed + 1),
                FetchAnswer::Wait
            );
            assert_eq!(
                fetch_answer(None, primary, segment, installed),
                FetchAnswer::Wait
            );
        }
        let mut newer = CacheTopology::new(route.topology.current().clone());
        let members: Vec<crate::Member> = route.topology.current().members()[..2].to_vec();
        assert!(newer.members_changed(&members).unwrap_or(false));
        let newer = CacheRoute::new(newer);
        let me = newer.segments[0].write[0].clone();
        assert_eq!(
            fetch_answer(Some(&newer), &me, 0, installed),
            FetchAnswer::Stale
        );
    }

    // Proves the primary of a segment that moves takes no write during ReadAllWriteAll (it
    // hands the segment over), and the next one orders them from ReadNewWriteAll on: no
    // phase has two members ordering one segment's writes.
    #[test]
    fn a_moving_segment_is_ordered_by_one_member_at_a_time() {
        let start = route(Mode::Distributed { owners: 2 });
        let mut topology = CacheTopology::new(start.topology.current().clone());
        let mut members: Vec<crate::Member> = start.topology.current().members().to_vec();
        members.push(crate::Member {
            id: MemberId("d".to_owned()),
            location: crate::Location::default(),
        });
        assert!(topology.members_changed(&members).unwrap_or(false));
        let ids: Vec<MemberId> = members.iter().map(|m| m.id.clone()).collect();
        let mut handed_over = 0;
        let mut phases = Vec::new();
        loop {
            let route = CacheRoute::new(topology.clone());
            phases.push(topology.phase());
            for segment in 0..6u32 {
                let owners = &route.segments[segment as usize];
                let ordering: Vec<&MemberId> = ids.iter().filter(|id| owners.orders(id)).collect();
                let current = topology.current().owner_ids(segment as usize)[0].clone();
                let next = topology.pending().map_or(current.clone(), |p| {
                    p.owner_ids(segment as usize)[0].clone()
                });
                match topology.phase() {
                    Phase::ReadAllWriteAll if current != next => {
                        assert!(owners.hands_over);
                        assert!(ordering.is_empty(), "segment {segment}: {ordering:?}");
                        handed_over += 1;
                    }
                    Phase::ReadNewWriteAll => assert_eq!(ordering, vec![&next]),
                    _ => assert_eq!(ordering, vec![&current]),
                }
            }
            if topology.phase() == Phase::Stable {
                break;
            }
            let rebalance = topology.rebalance_id();
            for id in &ids {
                topology.confirm(id, rebalance);
            }
        }
        assert_eq!(
            phases,
            vec![
                Phase::ReadOldWriteAll,
                Phase::ReadAllWriteAll,
                Phase::ReadNewWriteAll,
                Phase::Stable
            ]
        );
        assert!(handed_over > 0, "no segment changed primary");
    }
}
