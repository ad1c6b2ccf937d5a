//! Weft's clustering logic, written as plain data and pure functions so that the server and
//! the deterministic simulator drive the same code.
//!
//! This crate owns:
//! * [`Member`] and [`Location`]: a node's identity and where it runs (site, rack, machine);
//! * [`Partitioner`]: which segment a key belongs to — Hot Rod's MurmurHash3 ranges (what the
//!   official Infinispan clients compute) or Redis Cluster's CRC16 slots (what Redis cluster
//!   clients compute);
//! * [`ConsistentHash`]: each segment's owners (primary first), built balanced (every member's
//!   primary and total segment counts within one of the fair share), topology-aware (backups
//!   on other machines, then racks, then sites, where possible) and, from a previous hash,
//!   moving as few segments as possible;
//! * [`topology`]: a cache's topology in transition — the phases that move segments so that
//!   no read goes to a member without the data and no copy is lost to a restart;
//! * [`membership`]: who is in the cluster — SWIM failure detection (the `foca` crate) as a
//!   state machine fed datagrams and timers, so a simulator can drive it like the server.
//!
//! * [`state`]: the cluster metadata (members, caches, topologies) as a deterministic state
//!   machine over commands, which the server orders through Raft;
//! * [`engine`]: a member's decisions about each agreed state (fencing, admission, topology
//!   phases, state transfers, merges) as a state machine that returns effects, which the
//!   server's node and the simulator both carry out;
//! * [`handshake`]: how two nodes prove, when a connection opens, that they know the
//!   cluster secret and which process (incarnation) each is;
//! * [`placement`]: each segment's owners as a member installed them, and where a keyed
//!   request runs;
//! * [`operation`]: keyed operations as values, run at the key's owner;
//! * [`wire`]: the messages nodes exchange (consensus, replication, forwarding, state
//!   transfer) and their framing.

mod consistent_hash;
pub mod engine;
pub mod handshake;
mod member;
pub mod membership;
pub mod operation;
mod partitioner;
pub mod placement;
pub mod state;
pub mod topology;
pub mod wire;

pub use consistent_hash::{ConsistentHash, HashError, Mode};
pub use member::{Location, Member, MemberId};
pub use partitioner::{Partitioner, PartitionerError, REDIS_SLOTS, crc16, redis_hash_tag};
