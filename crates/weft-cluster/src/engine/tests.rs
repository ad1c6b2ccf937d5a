use std::collections::HashSet;
use std::net::SocketAddr;

use super::*;
use crate::state::NodeRecord;
use crate::{Location, Mode};

fn node(name: &str, raft_id: u64) -> NodeRecord {
    NodeRecord {
        name: name.to_owned(),
        raft_id,
        cluster_addr: SocketAddr::from(([127, 0, 0, 1], 7800)),
        endpoint: SocketAddr::from(([127, 0, 0, 1], 11222)),
        location: Location::default(),
    }
}

/// A member's data as the tests see it: which caches it has and which hold entries.
#[derive(Default)]
struct Data {
    caches: HashSet<String>,
    holding: HashSet<String>,
}

impl Local for Data {
    fn has_cache(&self, cache: &str) -> bool {
        self.caches.contains(cache)
    }
    fn holds_entries(&self, cache: &str) -> bool {
        self.holding.contains(cache)
    }
}

fn define(state: &mut ClusterState) {
    let defined = state.apply(Command::DefineCache {
        name: "c".into(),
        config: "{}".into(),
        mode: Mode::Distributed { owners: 1 },
        segments: 8,
    });
    assert_eq!(defined, Ok(true));
}

fn with_cache() -> Data {
    Data {
        caches: ["c".to_owned()].into(),
        ..Data::default()
    }
}

fn proposals(effects: &[Effect]) -> Vec<(u32, Phase)> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::Propose(Command::Confirm {
                rebalance_id,
                phase,
                ..
            }) => Some((*rebalance_id, *phase)),
            _ => None,
        })
        .collect()
}

fn transfers(effects: &[Effect]) -> Vec<(u32, Sources)> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::Transfer {
                rebalance,
                segments,
                ..
            } => Some((*rebalance, segments.clone())),
            _ => None,
        })
        .collect()
}

// Proves a joining member is told to create a cache it lacks, routes by each new phase
// once, fetches what the rebalance hands it from the current owner, confirms once the
// transfer ends (not before), and confirms the later phases as they come.
#[test]
fn a_joining_member_fetches_then_confirms_each_phase() {
    let mut state = ClusterState::default();
    let _ = state.apply(Command::Members(vec![node("a", 1)]));
    define(&mut state);
    let _ = state.apply(Command::Members(vec![node("a", 1), node("b", 2)]));
    let mut b = Engine::new(MemberId("b".into()), 2);
    let effects = b.on_state(&state, 0, &Data::default());
    assert!(effects.contains(&Effect::Create { cache: "c".into() }));
    assert!(effects.iter().any(|e| matches!(
        e,
        Effect::Route { cache, exclude_me: false, .. } if cache == "c"
    )));
    let topology = state.cache("c").map(|c| c.topology.clone());
    let Some(topology) = topology else {
        panic!("the cache is defined")
    };
    assert_eq!(topology.phase(), Phase::ReadOldWriteAll);
    let started = transfers(&effects);
    assert_eq!(started.len(), 1, "{effects:?}");
    let (rebalance, segments) = &started[0];
    assert!(!segments.is_empty(), "b is handed segments");
    for (_, sources) in segments {
        assert_eq!(sources, &vec![MemberId("a".into())]);
    }
    assert!(
        proposals(&effects).is_empty(),
        "nothing is confirmed before the transfer"
    );

    // The same state again, and ticks while the transfer runs, change nothing.
    assert!(
        b.on_state(&state, 10, &with_cache()).len() == 1,
        "only Members"
    );
    assert!(b.on_tick(&state, 5_000).is_empty());

    let done = b.transfer_finished("c", *rebalance, true, 20);
    assert_eq!(proposals(&done), vec![(*rebalance, Phase::ReadOldWriteAll)]);
    // A lost proposal is made again, but not more often than once a second.
    assert!(b.on_tick(&state, 500).is_empty());
    assert_eq!(
        proposals(&b.on_tick(&state, 1_100)),
        vec![(*rebalance, Phase::ReadOldWriteAll)]
    );
    for member in ["a", "b"] {
        let _ = state.apply(Command::Confirm {
            cache: "c".into(),
            member: MemberId(member.into()),
            rebalance_id: *rebalance,
            phase: Phase::ReadOldWriteAll,
        });
    }
    let next = b.on_state(&state, 1_200, &with_cache());
    assert_eq!(proposals(&next), vec![(*rebalance, Phase::ReadAllWriteAll)]);
}

// Proves a transfer that failed starts again at the next tick, and a finished one is not
// fetched again when its phase is installed anew.
#[test]
fn a_failed_transfer_starts_again() {
    let mut state = ClusterState::default();
    let _ = state.apply(Command::Members(vec![node("a", 1)]));
    define(&mut state);
    let _ = state.apply(Command::Members(vec![node("a", 1), node("b", 2)]));
    let mut b = Engine::new(MemberId("b".into()), 2);
    let first = transfers(&b.on_state(&state, 0, &with_cache()));
    let rebalance = first[0].0;
    assert!(b.transferring("c", rebalance));
    assert!(b.transfer_finished("c", rebalance, false, 10).is_empty());
    assert!(!b.transferring("c", rebalance));
    assert_eq!(transfers(&b.on_tick(&state, 20)).len(), 1);
    let done = b.transfer_finished("c", rebalance, true, 30);
    assert_eq!(proposals(&done).len(), 1);
    // A finished transfer's phase, seen again, is only confirmed (after the retry delay).
    let again = b.on_tick(&state, 2_000);
    assert!(transfers(&again).is_empty());
    assert_eq!(proposals(&again), vec![(rebalance, Phase::ReadOldWriteAll)]);
}

// Proves a process that is not the member's first incarnation discards what it stored, a
// first one merges it once the topology is stable, and a process not admitted yet owns
// nothing and starts no transfer.
#[test]
fn admission_decides_what_stored_entries_become() {
    let mut state = ClusterState::default();
    let _ = state.apply(Command::Members(vec![node("a", 1)]));
    define(&mut state);
    let holding = Data {
        caches: ["c".to_owned()].into(),
        holding: ["c".to_owned()].into(),
    };

    // Not admitted: routes with itself left out.
    let mut b = Engine::new(MemberId("b".into()), 2);
    let effects = b.on_state(&state, 0, &holding);
    assert!(effects.iter().any(|e| matches!(
        e,
        Effect::Route {
            exclude_me: true,
            ..
        }
    )));
    assert!(transfers(&effects).is_empty());
    assert!(!b.admitted());

    // The first "a" the cluster admitted merges what it stored.
    let mut a = Engine::new(MemberId("a".into()), 1);
    let effects = a.on_state(&state, 0, &holding);
    assert!(
        effects.iter().any(|e| matches!(
            e,
            Effect::Merge {
                merge: Merge::All,
                ..
            }
        )),
        "{effects:?}"
    );
    assert!(!effects.iter().any(|e| matches!(e, Effect::Discard { .. })));

    // A second process named "a" discards it.
    let _ = state.apply(Command::Members(vec![node("a", 3)]));
    let mut successor = Engine::new(MemberId("a".into()), 3);
    let effects = successor.on_state(&state, 0, &holding);
    assert!(effects.contains(&Effect::Discard { cache: "c".into() }));
    assert!(!effects.iter().any(|e| matches!(e, Effect::Merge { .. })));
}

// Proves a member dropped from the members fences its writes in flight, and once
// re-admitted its caches are available again and merge their unowned segments at the next
// stable topology.
#[test]
fn a_dropped_member_fences_then_merges_when_readmitted() {
    let mut state = ClusterState::default();
    let _ = state.apply(Command::Members(vec![node("a", 1), node("b", 2)]));
    define(&mut state);
    let mut b = Engine::new(MemberId("b".into()), 2);
    let _ = b.on_state(&state, 0, &with_cache());
    let _ = state.apply(Command::Members(vec![node("a", 1)]));
    let dropped = b.on_state(&state, 10, &with_cache());
    assert!(dropped.contains(&Effect::Fence), "{dropped:?}");
    let _ = state.apply(Command::Members(vec![node("a", 1), node("b", 2)]));
    let back = b.on_state(&state, 20, &with_cache());
    assert!(back.contains(&Effect::Available { cache: "c".into() }));
    // The rebalance bringing it back runs; the merge waits for the stable topology.
    assert!(!back.iter().any(|e| matches!(e, Effect::Merge { .. })));
    let rebalance = transfers(&back)[0].0;
    let _ = b.transfer_finished("c", rebalance, true, 30);
    for phase in [
        Phase::ReadOldWriteAll,
        Phase::ReadAllWriteAll,
        Phase::ReadNewWriteAll,
    ] {
        for member in ["a", "b"] {
            let _ = state.apply(Command::Confirm {
                cache: "c".into(),
                member: MemberId(member.into()),
                rebalance_id: rebalance,
                phase,
            });
        }
    }
    assert_eq!(
        state.cache("c").map(|c| c.topology.phase()),
        Some(Phase::Stable)
    );
    let stable = b.on_state(&state, 40, &with_cache());
    assert!(
        stable.iter().any(|e| matches!(
            e,
            Effect::Merge {
                merge: Merge::Unowned,
                ..
            }
        )),
        "{stable:?}"
    );
}

// Proves a cache the cluster removed is removed here, a failed creation is tried again with
// the next state, and a cache defined again by the same name moves every segment afresh.
#[test]
fn removal_forgets_the_cache() {
    let mut state = ClusterState::default();
    let _ = state.apply(Command::Members(vec![node("a", 1)]));
    define(&mut state);
    let mut a = Engine::new(MemberId("a".into()), 1);
    let first = a.on_state(&state, 0, &Data::default());
    assert!(first.contains(&Effect::Create { cache: "c".into() }));
    a.not_created("c");
    let again = a.on_state(&state, 1, &Data::default());
    assert!(again.iter().any(|e| matches!(e, Effect::Route { .. })));
    let _ = state.apply(Command::RemoveCache { name: "c".into() });
    let removed = a.on_state(&state, 2, &with_cache());
    assert!(removed.contains(&Effect::Remove { cache: "c".into() }));
    define(&mut state);
    let defined = a.on_state(&state, 3, &Data::default());
    assert!(defined.iter().any(|e| matches!(e, Effect::Route { .. })));
}

// Proves the DEGRADED decision: a minority of the topology's members, or a segment without
// a reachable reader, degrades; a majority reaching every segment does not.
#[test]
fn degraded_when_cut_off_or_a_segment_is_unreachable() {
    let members: Vec<MemberId> = ["a", "b", "c"].map(|m| MemberId(m.into())).to_vec();
    let readers = [
        vec![members[0].clone(), members[1].clone()],
        vec![members[2].clone(), members[0].clone()],
    ];
    let only_a = |m: &MemberId| m.0 == "a";
    assert!(degraded_reason(&members, readers.iter().map(Vec::as_slice), &only_a).is_some());
    let a_and_b = |m: &MemberId| m.0 != "c";
    assert!(degraded_reason(&members, readers.iter().map(Vec::as_slice), &a_and_b).is_none());
    let lonely = [vec![members[2].clone()]];
    let reason = degraded_reason(&members, lonely.iter().map(Vec::as_slice), &a_and_b);
    assert_eq!(
        reason.as_deref(),
        Some("no owner of segment 0 is reachable")
    );
}
