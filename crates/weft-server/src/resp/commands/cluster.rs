//! `CLUSTER`: what a Redis cluster client asks to route keys itself — the slots, which node
//! serves each, and each key's slot. A node reports the session cache's agreed topology;
//! each segment is a run of `16384 / segments` slots, its primary the master. Backups are not
//! listed as replicas: every Weft node is the primary of some segments and a backup of others,
//! while Redis Cluster clients give each node one role (redis-py, seeing a node as a replica
//! of any range, leaves it out of the masters it scans and flushes), and they need no
//! replicas to route. With `key-partitioner = "redis-slots"` the segments are Redis' own slots, so
//! a cluster client sends every key to the node that orders it; with Infinispan's hash, keys
//! still work from any node (forwarded), one hop more.

use std::fmt::Write as _;

use bytes::Bytes;
use weft_cluster::MemberId;
use weft_core::hash::{REDIS_SLOTS, redis_slot};

use crate::resp::Reply;
use crate::resp::Session;
use crate::resp::commands::errors;

/// `CLUSTER <subcommand>`.
pub fn cluster(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let sub = args
        .get(1)
        .map(|s| s.to_ascii_uppercase())
        .unwrap_or_default();
    if sub.as_slice() == b"HELP" {
        super::streams::help_reply(
            reply,
            "CLUSTER",
            &[
                "INFO",
                "    Return information about the cluster.",
                "KEYSLOT <key>",
                "    Return the hash slot for <key>.",
                "MYID",
                "    Return the node id.",
                "NODES",
                "    Return cluster configuration seen by node. Output format:",
                "    <id> <ip:port@bus-port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
                "SHARDS",
                "    Return information about slot range mappings and the nodes associated with them.",
                "SLOTS",
                "    Return information about slots range mappings. Each range is made of:",
                "    start, end, master and replicas IP addresses, ports and ids",
            ],
        );
        return;
    }
    if sub.as_slice() == b"KEYSLOT" {
        let key = args.get(2).map_or(&[][..], |k| &k[..]);
        reply.integer(i64::from(redis_slot(key)));
        return;
    }
    let Some(view) = View::of(session) else {
        reply.error("ERR This instance has cluster support disabled");
        return;
    };
    match sub.as_slice() {
        b"MYID" => reply.bulk(node_id(&view.me).as_bytes()),
        b"INFO" => {
            let mut text = String::new();
            let state = if view.degraded { "fail" } else { "ok" };
            let _ = write!(
                text,
                "cluster_enabled:1\r\ncluster_state:{state}\r\ncluster_slots_assigned:{REDIS_SLOTS}\r\ncluster_slots_ok:{}\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:{}\r\ncluster_known_nodes:{}\r\ncluster_size:{}\r\ncluster_current_epoch:{}\r\ncluster_my_epoch:{}\r\n",
                if view.degraded { 0 } else { REDIS_SLOTS },
                if view.degraded { REDIS_SLOTS } else { 0 },
                view.nodes.len(),
                view.masters(),
                view.epoch,
                view.epoch,
            );
            reply.verbatim(&text);
        }
        b"SLOTS" => {
            reply.array(view.ranges.len());
            for range in &view.ranges {
                let master = &range.owners[..range.owners.len().min(1)];
                reply.array(2 + master.len());
                reply.integer(i64::from(range.start));
                reply.integer(i64::from(range.end));
                for owner in master {
                    let (host, port) = view.endpoint(owner);
                    reply.array(3);
                    reply.bulk(host.as_bytes());
                    reply.integer(i64::from(port));
                    reply.bulk(node_id(owner).as_bytes());
                }
            }
        }
        b"SHARDS" => {
            // One shard per master, with all its slot ranges.
            let mut shards: Vec<Shard<'_>> = Vec::new();
            for range in &view.ranges {
                let master = &range.owners[..range.owners.len().min(1)];
                match shards.iter_mut().find(|(owners, _)| *owners == master) {
                    Some((_, slots)) => slots.push((range.start, range.end)),
                    None => shards.push((master, vec![(range.start, range.end)])),
                }
            }
            reply.array(shards.len());
            for (owners, slots) in shards {
                reply.map(2);
                reply.bulk(b"slots");
                reply.array(slots.len() * 2);
                for (start, end) in &slots {
                    reply.integer(i64::from(*start));
                    reply.integer(i64::from(*end));
                }
                reply.bulk(b"nodes");
                reply.array(owners.len());
                for (i, owner) in owners.iter().enumerate() {
                    let (host, port) = view.endpoint(owner);
                    reply.map(7);
                    reply.bulk(b"id");
                    reply.bulk(node_id(owner).as_bytes());
                    reply.bulk(b"port");
                    reply.integer(i64::from(port));
                    reply.bulk(b"ip");
                    reply.bulk(host.as_bytes());
                    reply.bulk(b"endpoint");
                    reply.bulk(host.as_bytes());
                    reply.bulk(b"role");
                    reply.bulk(if i == 0 { b"master" } else { b"replica" });
                    reply.bulk(b"replication-offset");
                    reply.integer(0);
                    reply.bulk(b"health");
                    reply.bulk(if view.degraded { b"fail" } else { b"online" });
                }
            }
        }
        b"NODES" => {
            let mut text = String::new();
            for node in &view.nodes {
                let (host, port) = view.endpoint(node);
                let myself = if *node == view.me { "myself," } else { "" };
                let slots: Vec<String> = view
                    .ranges
                    .iter()
                    .filter(|range| range.owners.first() == Some(node))
                    .map(|range| {
                        if range.start == range.end {
                            range.start.to_string()
                        } else {
                            format!("{}-{}", range.start, range.end)
                        }
                    })
                    .collect();
                let _ = writeln!(
                    text,
                    "{} {host}:{port}@{port} {myself}master - 0 0 {} connected {}",
                    node_id(node),
                    view.epoch,
                    slots.join(" ")
                );
            }
            reply.bulk(text.as_bytes());
        }
        _ => reply.error(errors::SYNTAX),
    }
}

/// A node id as Redis shows them: 40 hex digits, derived from the node's name.
fn node_id(member: &MemberId) -> String {
    let mut id = String::with_capacity(40);
    let mut state: u64 = 0xcbf2_9ce4_8422_2325;
    for round in 0u8..5 {
        for byte in member.0.bytes().chain(std::iter::once(round)) {
            state = (state ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
        let _ = write!(id, "{state:016x}");
    }
    id.truncate(40);
    id
}

/// A shard: its owners (master first) and its slot ranges.
type Shard<'a> = (&'a [MemberId], Vec<(u32, u32)>);

struct Range {
    start: u32,
    end: u32,
    owners: Vec<MemberId>,
}

/// The session cache's agreed topology, as CLUSTER reports it.
struct View {
    me: MemberId,
    nodes: Vec<MemberId>,
    endpoints: Vec<(MemberId, String, u16)>,
    ranges: Vec<Range>,
    epoch: u32,
    degraded: bool,
}

impl View {
    fn of(session: &Session) -> Option<Self> {
        let node = session.context.cluster.as_ref()?;
        let cache = session.cache.name();
        if !session.cache.config().mode.is_clustered() {
            return None;
        }
        let routing = node.routing();
        let route = routing.cache(cache)?;
        let segments = u32::try_from(route.segments.len()).ok()?.max(1);
        let width = (REDIS_SLOTS / segments.min(REDIS_SLOTS)).max(1);
        let mut ranges: Vec<Range> = Vec::new();
        for (segment, owners) in route.segments.iter().enumerate() {
            let segment = u32::try_from(segment).ok()?;
            let start = segment * width;
            if start >= REDIS_SLOTS {
                break;
            }
            let end = if segment + 1 == segments {
                REDIS_SLOTS - 1
            } else {
                (start + width - 1).min(REDIS_SLOTS - 1)
            };
            match ranges.last_mut() {
                Some(last) if last.owners == owners.write && last.end + 1 == start => {
                    last.end = end
                }
                _ => ranges.push(Range {
                    start,
                    end,
                    owners: owners.write.clone(),
                }),
            }
        }
        let nodes = route.topology.members();
        let endpoints = nodes
            .iter()
            .filter_map(|member| {
                let record = routing.node(member)?;
                Some((
                    member.clone(),
                    record.endpoint.ip().to_string(),
                    record.endpoint.port(),
                ))
            })
            .collect();
        Some(Self {
            me: routing.local().clone(),
            nodes,
            endpoints,
            ranges,
            epoch: route.topology.id(),
            degraded: routing.degraded(cache).is_some(),
        })
    }

    fn endpoint(&self, member: &MemberId) -> (String, u16) {
        self.endpoints
            .iter()
            .find(|(id, _, _)| id == member)
            .map_or_else(
                || ("?".to_owned(), 0),
                |(_, host, port)| (host.clone(), *port),
            )
    }

    fn masters(&self) -> usize {
        let mut masters: Vec<&MemberId> = self
            .ranges
            .iter()
            .filter_map(|r| r.owners.first())
            .collect();
        masters.sort();
        masters.dedup();
        masters.len()
    }
}
