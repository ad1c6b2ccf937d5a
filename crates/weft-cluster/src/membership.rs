//! Membership and failure detection: SWIM (the `foca` crate), sans-IO.
//!
//! A [`Membership`] is one node's view of who is in the cluster. It is driven from outside:
//! datagrams from other nodes go in through [`Membership::handle_datagram`], timers it asked
//! for come back through [`Membership::handle_timer`], and every call returns an [`Output`]
//! — datagrams to send, timers to set, and [`MemberEvent`]s (a member came up or went
//! down). The server feeds it from a UDP socket and the tokio clock; a simulator feeds it
//! from a seeded network and a virtual clock, and gets the same behaviour.
//!
//! A node's [`NodeIdentity`] carries its name, the address it listens on for cluster
//! traffic, its location (site, rack, machine) and a generation, bumped when a node that was
//! declared down comes back (SWIM never lets a down identity come back up).

use std::fmt;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use foca::{
    AccumulatingRuntime, Config, Foca, NoCustomBroadcast, OwnedNotification, PostcardCodec, Timer,
};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::member::{Location, Member, MemberId};

/// Who a node is, as the other nodes see it.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeIdentity {
    /// The node's unique name.
    pub name: String,
    /// Where it listens for cluster traffic.
    pub addr: SocketAddr,
    /// Site, rack and machine, for placing backups.
    pub site: Option<String>,
    /// Rack within the site.
    pub rack: Option<String>,
    /// Machine within the rack.
    pub machine: Option<String>,
    /// Bumped on each rejoin after being declared down; 0 only for the placeholder of a seed
    /// whose identity is not known yet.
    pub generation: u64,
}

impl NodeIdentity {
    /// A node's first identity.
    #[must_use]
    pub fn new(name: impl Into<String>, addr: SocketAddr, location: Location) -> Self {
        Self {
            name: name.into(),
            addr,
            site: location.site,
            rack: location.rack,
            machine: location.machine,
            generation: 1,
        }
    }

    /// The placeholder for a seed known only by its address.
    fn seed(addr: SocketAddr) -> Self {
        Self {
            name: String::new(),
            addr,
            site: None,
            rack: None,
            machine: None,
            generation: 0,
        }
    }

    /// This node as a member of consistent hashes.
    #[must_use]
    pub fn member(&self) -> Member {
        Member {
            id: MemberId(self.name.clone()),
            location: Location {
                site: self.site.clone(),
                rack: self.rack.clone(),
                machine: self.machine.clone(),
            },
        }
    }
}

impl fmt::Debug for NodeIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}#{}", self.name, self.addr, self.generation)
    }
}

impl foca::Identity for NodeIdentity {
    type Addr = SocketAddr;

    fn renew(&self) -> Option<Self> {
        Some(Self {
            generation: self.generation.wrapping_add(1).max(1),
            ..self.clone()
        })
    }

    fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn win_addr_conflict(&self, adversary: &Self) -> bool {
        self.generation > adversary.generation
    }
}

/// A change of membership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberEvent {
    /// A node joined, or came back with a new generation.
    Up(NodeIdentity),
    /// A node left or was declared down by failure detection.
    Down(NodeIdentity),
    /// This node lost contact with every other node.
    Isolated,
    /// This node was declared down by the others and rejoined under a new generation.
    Rejoined(NodeIdentity),
}

/// A timer to give back to [`Membership::handle_timer`] after its delay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MembershipTimer(TimerKind);

#[derive(Debug, Clone, PartialEq, Eq)]
enum TimerKind {
    /// SWIM's own.
    Swim(Timer<NodeIdentity>),
    /// Time to announce to the seeds again if still alone.
    Rejoin,
}

/// What one call produced: datagrams to send, timers to set, events.
#[derive(Debug, Default)]
pub struct Output {
    /// Datagrams and where to send them.
    pub send: Vec<(SocketAddr, Vec<u8>)>,
    /// Timers and their delays.
    pub timers: Vec<(Duration, MembershipTimer)>,
    /// Membership changes, in order.
    pub events: Vec<MemberEvent>,
}

/// A failure of the membership protocol (a malformed or foreign datagram, mostly).
#[derive(Debug, Error)]
#[error("membership: {0}")]
pub struct MembershipError(#[from] foca::Error);

/// Failure-detection timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MembershipConfig {
    /// How often a node probes another.
    pub probe_period: Duration,
    /// How long a probe waits for its answer before asking others to probe indirectly.
    pub probe_rtt: Duration,
    /// How long a suspected node has to refute it before it is declared down.
    pub suspect_to_down_after: Duration,
    /// Expected cluster size, which sets how many times an update is retransmitted.
    pub expected_size: u32,
}

impl Default for MembershipConfig {
    /// LAN timing (memberlist's): probe every second, 500 ms round trip, a suspect down
    /// after about five seconds.
    fn default() -> Self {
        Self {
            probe_period: Duration::from_secs(1),
            probe_rtt: Duration::from_millis(500),
            suspect_to_down_after: Duration::from_secs(5),
            expected_size: 8,
        }
    }
}

impl MembershipConfig {
    fn foca(&self) -> Config {
        let size = NonZeroU32::new(self.expected_size.max(1)).unwrap_or(NonZeroU32::MIN);
        let mut config = Config::new_lan(size);
        config.probe_period = self.probe_period;
        config.probe_rtt = self.probe_rtt.min(self.probe_period);
        config.suspect_to_down_after = self.suspect_to_down_after;
        // Forget down members after a while, but long after anyone could still be probing.
        config.remove_down_after = Some(self.suspect_to_down_after.saturating_mul(12));
        config
    }
}

/// One node's membership state machine.
pub struct Membership {
    foca: Foca<NodeIdentity, PostcardCodec, StdRng, NoCustomBroadcast>,
    runtime: AccumulatingRuntime<NodeIdentity>,
    /// Where to announce this node while it knows no other (a lost announcement, a node
    /// started before its seeds, a healed partition).
    seeds: Vec<SocketAddr>,
    rejoin_every: Duration,
    rejoin_scheduled: bool,
}

impl fmt::Debug for Membership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Membership")
            .field("identity", self.foca.identity())
            .field("members", &self.foca.num_members())
            .finish()
    }
}

impl Membership {
    /// A node alone, with randomness from `seed` (a simulator passes its own; the server a
    /// random one).
    #[must_use]
    pub fn new(identity: NodeIdentity, config: &MembershipConfig, seed: u64) -> Self {
        Self {
            foca: Foca::new(
                identity,
                config.foca(),
                StdRng::seed_from_u64(seed),
                PostcardCodec,
            ),
            runtime: AccumulatingRuntime::new(),
            seeds: Vec::new(),
            rejoin_every: config.probe_period,
            rejoin_scheduled: false,
        }
    }

    /// This node's identity (its generation changes when it rejoins).
    #[must_use]
    pub fn identity(&self) -> &NodeIdentity {
        self.foca.identity()
    }

    /// Asks the nodes at `seeds` to let this one in, and keeps asking, every probe period,
    /// whenever this node knows no other (until then, and after losing every peer).
    ///
    /// # Errors
    /// [`MembershipError`] if the announcement cannot be encoded.
    pub fn join(&mut self, seeds: &[SocketAddr]) -> Result<Output, MembershipError> {
        for &seed in seeds {
            if seed != self.identity().addr && !self.seeds.contains(&seed) {
                self.seeds.push(seed);
            }
        }
        self.announce_to_seeds()?;
        let mut output = self.drain();
        if !self.rejoin_scheduled && !self.seeds.is_empty() {
            self.rejoin_scheduled = true;
            output
                .timers
                .push((self.rejoin_every, MembershipTimer(TimerKind::Rejoin)));
        }
        Ok(output)
    }

    fn announce_to_seeds(&mut self) -> Result<(), MembershipError> {
        for seed in self.seeds.clone() {
            self.foca
                .announce(NodeIdentity::seed(seed), &mut self.runtime)?;
        }
        Ok(())
    }

    /// Handles a datagram from another node.
    ///
    /// # Errors
    /// [`MembershipError`] for a datagram that is not a valid membership message (the state
    /// is unchanged).
    pub fn handle_datagram(&mut self, data: &[u8]) -> Result<Output, MembershipError> {
        let result = self.foca.handle_data(data, &mut self.runtime);
        let output = self.drain();
        result?;
        Ok(output)
    }

    /// Handles a timer this node asked for.
    ///
    /// # Errors
    /// [`MembershipError`] if the protocol fails to act on it.
    pub fn handle_timer(&mut self, timer: MembershipTimer) -> Result<Output, MembershipError> {
        match timer.0 {
            TimerKind::Swim(timer) => {
                let result = self.foca.handle_timer(timer, &mut self.runtime);
                let output = self.drain();
                result?;
                Ok(output)
            }
            TimerKind::Rejoin => {
                if self.foca.num_members() == 0 {
                    self.announce_to_seeds()?;
                }
                let mut output = self.drain();
                output
                    .timers
                    .push((self.rejoin_every, MembershipTimer(TimerKind::Rejoin)));
                Ok(output)
            }
        }
    }

    /// Tells the others this node is leaving (a graceful shutdown), so they need not wait for
    /// failure detection.
    ///
    /// # Errors
    /// [`MembershipError`] if the announcement cannot be encoded.
    pub fn leave(&mut self) -> Result<Output, MembershipError> {
        self.foca.leave_cluster(&mut self.runtime)?;
        Ok(self.drain())
    }

    /// The other nodes currently believed alive, by name.
    #[must_use]
    pub fn peers(&self) -> Vec<NodeIdentity> {
        let mut peers: Vec<NodeIdentity> = self
            .foca
            .iter_members()
            .map(|member| member.id().clone())
            .filter(|id| id.generation > 0)
            .collect();
        peers.sort_by(|a, b| a.name.cmp(&b.name));
        peers
    }

    fn drain(&mut self) -> Output {
        let mut output = Output::default();
        while let Some((to, data)) = self.runtime.to_send() {
            output.send.push((to.addr, data.to_vec()));
        }
        while let Some((after, timer)) = self.runtime.to_schedule() {
            output
                .timers
                .push((after, MembershipTimer(TimerKind::Swim(timer))));
        }
        while let Some(notification) = self.runtime.to_notify() {
            let event = match notification {
                OwnedNotification::MemberUp(id) if id.generation > 0 => MemberEvent::Up(id),
                OwnedNotification::MemberDown(id) if id.generation > 0 => MemberEvent::Down(id),
                OwnedNotification::Rename(old, new) if old.generation > 0 => {
                    output.events.push(MemberEvent::Down(old));
                    MemberEvent::Up(new)
                }
                OwnedNotification::Rename(_, new) => MemberEvent::Up(new),
                OwnedNotification::Idle => MemberEvent::Isolated,
                OwnedNotification::Rejoin(id) => MemberEvent::Rejoined(id),
                _ => continue,
            };
            output.events.push(event);
        }
        output
    }
}
