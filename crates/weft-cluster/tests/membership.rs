//! Membership on a simulated network: nodes exchange datagrams through a seeded in-memory
//! network with a virtual clock (latency, loss), so the same seed replays the same run. Nodes
//! find each other from one seed address, a crashed node is declared down by the others, a
//! node that leaves is gone at once, and a node cut off and healed comes back.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::net::SocketAddr;
use std::time::Duration;

use weft_cluster::Location;
use weft_cluster::membership::{
    MemberEvent, Membership, MembershipConfig, MembershipTimer, NodeIdentity, Output,
};

/// A scheduled happening: a timer firing or a datagram arriving.
enum Happening {
    Timer(usize, MembershipTimer),
    Datagram(usize, Vec<u8>),
}

struct Sim {
    nodes: Vec<Membership>,
    crashed: Vec<bool>,
    /// Pairs that cannot talk (a partition), by node index.
    cut: Vec<(usize, usize)>,
    addrs: BTreeMap<SocketAddr, usize>,
    now: Duration,
    seq: u64,
    queue: BinaryHeap<Reverse<(Duration, u64)>>,
    pending: BTreeMap<u64, Happening>,
    rng: u64,
    loss_percent: u64,
    log: Vec<(Duration, usize, MemberEvent)>,
}

fn addr(i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 7800 + u16::try_from(i).unwrap()))
}

fn config() -> MembershipConfig {
    MembershipConfig {
        probe_period: Duration::from_millis(200),
        probe_rtt: Duration::from_millis(100),
        suspect_to_down_after: Duration::from_secs(1),
        expected_size: 5,
    }
}

impl Sim {
    fn new(count: usize, seed: u64, loss_percent: u64) -> Self {
        let nodes = (0..count)
            .map(|i| {
                let location = Location {
                    machine: Some(format!("m{i}")),
                    ..Location::default()
                };
                let identity = NodeIdentity::new(format!("node-{i}"), addr(i), location);
                Membership::new(
                    identity,
                    &config(),
                    seed.wrapping_mul(31).wrapping_add(i as u64),
                )
            })
            .collect();
        Self {
            nodes,
            crashed: vec![false; count],
            cut: Vec::new(),
            addrs: (0..count).map(|i| (addr(i), i)).collect(),
            now: Duration::ZERO,
            seq: 0,
            queue: BinaryHeap::new(),
            pending: BTreeMap::new(),
            rng: seed | 1,
            loss_percent,
            log: Vec::new(),
        }
    }

    fn random(&mut self, below: u64) -> u64 {
        // xorshift64*: deterministic per seed.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) % below
    }

    fn schedule(&mut self, after: Duration, happening: Happening) {
        self.seq += 1;
        self.queue.push(Reverse((self.now + after, self.seq)));
        self.pending.insert(self.seq, happening);
    }

    fn apply(&mut self, from: usize, output: Output) {
        for event in output.events {
            self.log.push((self.now, from, event));
        }
        for (after, timer) in output.timers {
            self.schedule(after, Happening::Timer(from, timer));
        }
        for (to, data) in output.send {
            let Some(&to) = self.addrs.get(&to) else {
                continue;
            };
            let cut = self.cut.contains(&(from, to)) || self.cut.contains(&(to, from));
            if cut || self.random(100) < self.loss_percent {
                continue;
            }
            let latency = Duration::from_micros(200 + self.random(3_000));
            self.schedule(latency, Happening::Datagram(to, data));
        }
    }

    fn run_for(&mut self, span: Duration) {
        let until = self.now + span;
        while let Some(&Reverse((at, seq))) = self.queue.peek() {
            if at > until {
                break;
            }
            self.queue.pop();
            self.now = at;
            let happening = self.pending.remove(&seq).unwrap();
            let (node, result) = match happening {
                Happening::Timer(node, _) | Happening::Datagram(node, _) if self.crashed[node] => {
                    continue;
                }
                Happening::Timer(node, timer) => (node, self.nodes[node].handle_timer(timer)),
                Happening::Datagram(node, data) => (node, self.nodes[node].handle_datagram(&data)),
            };
            let output = result.expect("valid traffic is accepted");
            self.apply(node, output);
        }
        self.now = until;
    }

    fn join(&mut self, node: usize, seed: usize) {
        let output = self.nodes[node].join(&[addr(seed)]).unwrap();
        self.apply(node, output);
    }

    fn peers(&self, node: usize) -> Vec<String> {
        self.nodes[node]
            .peers()
            .into_iter()
            .map(|p| p.name)
            .collect()
    }

    fn names(nodes: &[usize]) -> Vec<String> {
        nodes.iter().map(|i| format!("node-{i}")).collect()
    }
}

/// Runs until every live node in `alive` sees exactly the others, within `limit`; panics
/// with what each sees otherwise. Returns how long it took.
fn converge(sim: &mut Sim, alive: &[usize], limit: Duration, what: &str) -> Duration {
    let start = sim.now;
    loop {
        let agreed = alive.iter().all(|&node| {
            let others: Vec<usize> = alive.iter().copied().filter(|&o| o != node).collect();
            sim.peers(node) == Sim::names(&others)
        });
        if agreed {
            return sim.now - start;
        }
        assert!(
            sim.now - start < limit,
            "{what}: no agreement after {limit:?}: {:?}",
            alive.iter().map(|&n| (n, sim.peers(n))).collect::<Vec<_>>()
        );
        sim.run_for(Duration::from_millis(50));
    }
}

fn scenario(seed: u64, loss_percent: u64) -> Sim {
    let mut sim = Sim::new(5, seed, loss_percent);
    for node in 1..5 {
        sim.join(node, 0);
    }
    let lossy = loss_percent > 0;
    converge(
        &mut sim,
        &[0, 1, 2, 3, 4],
        Duration::from_secs(10),
        &format!("seed {seed}: joins"),
    );

    // A crash: the others declare node 4 down once its suspicion times out (1 s here).
    sim.crashed[4] = true;
    let took = converge(
        &mut sim,
        &[0, 1, 2, 3],
        Duration::from_secs(10),
        &format!("seed {seed}: crash"),
    );
    if !lossy {
        assert!(
            took >= Duration::from_secs(1),
            "seed {seed}: down before suspicion ended"
        );
    }

    // A graceful leave is seen well before failure detection would take (with loss, its
    // announcement may be lost, and failure detection finishes the job; a node wrongly
    // declared down by lost probes comes back under a new generation).
    let output = sim.nodes[3].leave().unwrap();
    sim.apply(3, output);
    sim.crashed[3] = true;
    let limit = if lossy {
        Duration::from_secs(10)
    } else {
        Duration::from_millis(500)
    };
    converge(&mut sim, &[0, 1, 2], limit, &format!("seed {seed}: leave"));
    sim
}

// Proves nodes find each other through one seed, a crashed node is declared down by every
// other, and a leaving one is gone within half a second, over many seeded runs.
#[test]
fn join_crash_and_leave() {
    for seed in 0..40 {
        scenario(seed, 0);
    }
}

// Proves the same with 5% of datagrams lost (suspicions get refuted, nobody is wrongly
// declared down for long enough to miss the checks).
#[test]
fn join_crash_and_leave_with_loss() {
    for seed in 100..120 {
        scenario(seed, 5);
    }
}

// Proves a run is replayable: the same seed gives the same membership events at the same
// virtual times.
#[test]
fn runs_replay_by_seed() {
    let events = |seed| {
        scenario(seed, 5)
            .log
            .iter()
            .map(|(at, node, event)| format!("{at:?} {node} {event:?}"))
            .collect::<Vec<_>>()
    };
    assert_eq!(events(7), events(7));
    assert_ne!(events(7), events(8));
}

// Proves a node cut off from the others is declared down on both sides, and that once the
// partition heals both sides see each other again (the isolated node rejoins under a new
// generation).
#[test]
fn partition_and_heal() {
    let mut sim = Sim::new(3, 42, 0);
    sim.join(1, 0);
    sim.join(2, 0);
    sim.run_for(Duration::from_secs(3));
    assert_eq!(sim.peers(0), Sim::names(&[1, 2]));
    sim.cut = vec![(2, 0), (2, 1)];
    sim.run_for(Duration::from_secs(6));
    assert_eq!(sim.peers(0), Sim::names(&[1]));
    assert_eq!(sim.peers(2), Vec::<String>::new());
    sim.cut.clear();
    // The isolated node, alone, announces itself to its seed again.
    sim.run_for(Duration::from_secs(5));
    assert_eq!(sim.peers(0), Sim::names(&[1, 2]));
    assert_eq!(sim.peers(2), Sim::names(&[0, 1]));
    assert!(sim.nodes[2].identity().generation >= 1);
}

// Proves garbage is refused or ignored without a panic and changes nothing.
#[test]
fn garbage_datagrams_change_nothing() {
    let mut sim = Sim::new(2, 1, 0);
    sim.join(1, 0);
    sim.run_for(Duration::from_secs(2));
    assert!(sim.nodes[0].handle_datagram(b"hello world").is_err());
    for garbage in [&b""[..], b"\xff", &[0u8; 64][..], &[0xffu8; 300][..]] {
        if let Ok(output) = sim.nodes[0].handle_datagram(garbage) {
            assert!(output.events.is_empty() && output.send.is_empty());
        }
    }
    sim.run_for(Duration::from_secs(2));
    assert_eq!(sim.peers(0), Sim::names(&[1]));
}
