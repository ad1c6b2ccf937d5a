//! Topology changes checked against a model of where data is: random joins, crashes (never
//! more than the copies allow) and phase confirmations, and after every step reads go only
//! to members holding a complete copy, writes reach every member holding one, and no segment
//! is left without one. Once changes stop, confirmations bring the cache back to a stable,
//! balanced topology whose owners hold the data.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use weft_cluster::topology::{CacheTopology, Phase};
use weft_cluster::{ConsistentHash, Member, MemberId, Mode};

const SEGMENTS: usize = 32;

#[derive(Debug, Clone)]
enum Step {
    Join,
    Crash(usize),
    Confirm(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => Just(Step::Join),
        1 => (0usize..16).prop_map(Step::Crash),
        6 => (0usize..16).prop_map(Step::Confirm),
    ]
}

struct Model {
    topology: CacheTopology,
    live: Vec<Member>,
    /// Per segment, the members holding a complete, up-to-date copy.
    holders: Vec<BTreeSet<MemberId>>,
    next_id: usize,
}

impl Model {
    fn new(members: usize, owners: usize) -> Self {
        let live: Vec<Member> = (0..members).map(|i| Member::new(format!("n{i}"))).collect();
        let hash =
            ConsistentHash::new(live.clone(), SEGMENTS, Mode::Distributed { owners }).unwrap();
        let holders = (0..SEGMENTS)
            .map(|s| hash.owner_ids(s).into_iter().cloned().collect())
            .collect();
        Self {
            topology: CacheTopology::new(hash),
            live,
            holders,
            next_id: members,
        }
    }

    fn check(&mut self) {
        for s in 0..SEGMENTS {
            // A member that stops receiving writes no longer holds an up-to-date copy.
            let writes: BTreeSet<MemberId> = self.topology.write_owners(s).into_iter().collect();
            self.holders[s].retain(|m| writes.contains(m));
            assert!(!self.holders[s].is_empty(), "segment {s} lost every copy");
            let reads = self.topology.read_owners(s);
            assert!(!reads.is_empty(), "segment {s} has nowhere to read");
            for reader in &reads {
                assert!(
                    self.holders[s].contains(reader),
                    "segment {s} read from {reader} which lacks it (phase {:?})",
                    self.topology.phase()
                );
            }
        }
    }

    fn apply(&mut self, step: &Step) {
        match *step {
            Step::Join => {
                let member = Member::new(format!("n{}", self.next_id));
                self.next_id += 1;
                self.live.push(member);
                self.topology.members_changed(&self.live).unwrap();
            }
            Step::Crash(pick) => {
                if self.live.len() < 2 {
                    return;
                }
                let victim = self.live[pick % self.live.len()].id.clone();
                // Never more crashes than copies: every segment keeps a holder.
                if self
                    .holders
                    .iter()
                    .any(|h| h.len() == 1 && h.contains(&victim))
                {
                    return;
                }
                self.live.retain(|m| m.id != victim);
                for holders in &mut self.holders {
                    holders.remove(&victim);
                }
                self.topology.members_changed(&self.live).unwrap();
            }
            Step::Confirm(pick) => {
                let members = self.topology.members();
                let member = members[pick % members.len()].clone();
                // Confirming the first phase means having fetched every new segment from a
                // member that holds it.
                for s in self.topology.to_fetch(&member) {
                    let reads = self.topology.read_owners(s);
                    assert!(reads.iter().any(|r| self.holders[s].contains(r)));
                    self.holders[s].insert(member.clone());
                }
                let before = self.topology.phase();
                let rebalance = self.topology.rebalance_id();
                self.topology.confirm(&member, rebalance);
                if before == Phase::ReadNewWriteAll && self.topology.phase() == Phase::Stable {
                    // Old owners drop what they no longer own.
                    let hash = self.topology.current();
                    for s in 0..SEGMENTS {
                        let owners: BTreeSet<MemberId> =
                            hash.owner_ids(s).into_iter().cloned().collect();
                        self.holders[s].retain(|m| owners.contains(m));
                    }
                }
            }
        }
    }

    fn settle(&mut self) {
        for _ in 0..16 {
            if self.topology.phase() == Phase::Stable {
                break;
            }
            for i in 0..self.topology.members().len() {
                self.apply(&Step::Confirm(i));
                self.check();
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    // Proves the phases never read from a member without the data, never leave a segment
    // without a copy while crashes stay within the copies, and end stable and balanced.
    #[test]
    fn rebalances_keep_every_segment_readable(
        members in 1usize..5,
        owners in 1usize..4,
        steps in proptest::collection::vec(step(), 0..40),
    ) {
        let mut model = Model::new(members, owners);
        model.check();
        let mut ids = BTreeMap::new();
        for step in &steps {
            let before = model.topology.id();
            model.apply(step);
            prop_assert!(model.topology.id() >= before, "topology ids never go back");
            ids.insert(model.topology.id(), model.topology.phase());
            model.check();
        }
        model.settle();
        prop_assert_eq!(model.topology.phase(), Phase::Stable);
        let hash = model.topology.current();
        prop_assert_eq!(hash.members().len(), model.live.len());
        let n = owners.min(model.live.len());
        for s in 0..SEGMENTS {
            let owners: BTreeSet<MemberId> = hash.owner_ids(s).into_iter().cloned().collect();
            prop_assert_eq!(owners.len(), n);
            prop_assert_eq!(&owners, &model.holders[s]);
        }
        for m in 0..hash.members().len() {
            let owned = hash.segments_of(m).len();
            prop_assert!((SEGMENTS * n / hash.members().len()..=(SEGMENTS * n).div_ceil(hash.members().len())).contains(&owned));
        }
    }
}

// Proves the phase sequence of one join and what each phase routes where.
#[test]
fn one_join_walks_the_phases() {
    let a = Member::new("a");
    let b = Member::new("b");
    let hash = ConsistentHash::new(vec![a.clone()], 4, Mode::Distributed { owners: 2 }).unwrap();
    let mut topology = CacheTopology::new(hash);
    assert_eq!((topology.id(), topology.phase()), (1, Phase::Stable));
    assert!(topology.members_changed(&[a.clone(), b.clone()]).unwrap());
    assert_eq!(
        (topology.id(), topology.phase()),
        (2, Phase::ReadOldWriteAll)
    );
    assert_eq!(topology.read_owners(0), vec![a.id.clone()]);
    assert_eq!(topology.write_owners(0).len(), 2);
    assert_eq!(topology.to_fetch(&b.id), vec![0, 1, 2, 3]);
    assert!(topology.to_fetch(&a.id).is_empty());
    // A stale confirmation is ignored; the phase waits for both.
    assert!(!topology.confirm(&b.id, 0));
    assert!(!topology.confirm(&b.id, 1));
    assert!(topology.confirm(&a.id, 1));
    assert_eq!(
        (topology.id(), topology.phase()),
        (3, Phase::ReadAllWriteAll)
    );
    assert_eq!(topology.read_owners(0).len(), 2);
    topology.confirm(&a.id, 1);
    topology.confirm(&b.id, 1);
    assert_eq!(topology.phase(), Phase::ReadNewWriteAll);
    topology.confirm(&a.id, 1);
    topology.confirm(&b.id, 1);
    assert_eq!((topology.id(), topology.phase()), (5, Phase::Stable));
    assert!(topology.pending().is_none());
    assert_eq!(topology.current().owner_ids(0).len(), 2);
    // An unchanged membership changes nothing.
    assert!(!topology.members_changed(&[b, a]).unwrap());
    assert_eq!(topology.id(), 5);
}

// Proves a segment is marked lost exactly when every member holding it leaves at once (its
// new owners start empty), stays marked through the rebalance, and is unmarked once merged
// back; a segment that kept a copy is never marked.
#[test]
fn segments_that_lost_every_copy_are_marked_until_merged_back() {
    let members: Vec<Member> = (0..5).map(|i| Member::new(format!("n{i}"))).collect();
    let hash =
        ConsistentHash::new(members.clone(), SEGMENTS, Mode::Distributed { owners: 2 }).unwrap();
    let mut topology = CacheTopology::new(hash.clone());
    let gone = [MemberId("n0".to_owned()), MemberId("n1".to_owned())];
    let expected: BTreeSet<u32> = (0..SEGMENTS)
        .filter(|&s| hash.owner_ids(s).iter().all(|owner| gone.contains(owner)))
        .map(|s| u32::try_from(s).unwrap())
        .collect();
    assert!(
        !expected.is_empty(),
        "some segment was owned by n0 and n1 alone"
    );
    let live: Vec<Member> = members[2..].to_vec();
    assert!(topology.members_changed(&live).unwrap());
    assert_eq!(topology.lost(), &expected);
    // Through the rebalance's phases.
    for _ in 0..3 {
        for member in &live {
            topology.confirm(&member.id, topology.rebalance_id());
        }
    }
    assert_eq!(topology.phase(), Phase::Stable);
    assert_eq!(topology.lost(), &expected);
    let first = *expected.iter().next().unwrap();
    assert!(topology.merged(&[first]));
    assert!(!topology.lost().contains(&first));
    assert!(!topology.merged(&[first]), "merging twice changes nothing");

    // One member gone: every segment kept a copy.
    let mut kept = CacheTopology::new(hash);
    assert!(kept.members_changed(&members[1..]).unwrap());
    assert!(kept.lost().is_empty());
}
