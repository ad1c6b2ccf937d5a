//! Where a cache's requests go: the servers the cluster last described for it and, for a
//! hash-aware client, each segment's owners (primary first). Updated from the topology a
//! response carries whenever the client's topology id is out of date, as the Java client does.
//!
//! Keys are placed as the server places them: Infinispan's MurmurHash3 of the key's bytes as
//! sent, into `segment_count` equal ranges (`weft_core::hash::segment_of`, hash function
//! version 3, Infinispan's `SegmentConsistentHash`).

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::RwLock;
use weft_hotrod::Topology;

/// The topology id of a client that has none.
pub(crate) const NO_TOPOLOGY: i32 = -1;

#[derive(Debug, Clone)]
struct View {
    id: i32,
    servers: Vec<SocketAddr>,
    /// Owners of each segment by index into `servers`, primary first.
    owners: Option<Vec<Vec<usize>>>,
}

/// One cache's view of the cluster.
#[derive(Debug)]
pub(crate) struct Routing {
    view: RwLock<View>,
    /// Round-robin position for requests without a key.
    next: AtomicUsize,
}

impl Routing {
    /// A view of `servers` with no topology yet.
    pub(crate) fn new(servers: Vec<SocketAddr>) -> Self {
        Self {
            view: RwLock::new(View {
                id: NO_TOPOLOGY,
                servers,
                owners: None,
            }),
            next: AtomicUsize::new(0),
        }
    }

    /// The topology id to send.
    pub(crate) fn topology_id(&self) -> i32 {
        self.view.read().id
    }

    /// The servers known now.
    pub(crate) fn servers(&self) -> Vec<SocketAddr> {
        self.view.read().servers.clone()
    }

    /// The segment count of the hash in force, if any.
    pub(crate) fn segment_count(&self) -> Option<usize> {
        self.view.read().owners.as_ref().map(Vec::len)
    }

    /// Servers to try for a request, best first: for a key with a known hash, the owners of
    /// its segment (primary first), then the other servers; otherwise every server, starting
    /// from the next in turn.
    pub(crate) fn candidates(&self, key: Option<&[u8]>) -> Vec<SocketAddr> {
        let view = self.view.read();
        let count = view.servers.len();
        let mut order: Vec<usize> = Vec::with_capacity(count);
        if let (Some(key), Some(owners)) = (key, &view.owners)
            && let Ok(segments) = u32::try_from(owners.len())
            && segments > 0
        {
            let segment = weft_core::hash::segment_of(key, segments) as usize;
            for &owner in &owners[segment] {
                if owner < count && !order.contains(&owner) {
                    order.push(owner);
                }
            }
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for offset in 0..count {
            let index = (start + offset) % count;
            if !order.contains(&index) {
                order.push(index);
            }
        }
        order.into_iter().map(|index| view.servers[index]).collect()
    }

    /// Takes in a topology a response carried; true when the server list changed.
    pub(crate) fn update(&self, topology: &Topology) -> bool {
        let servers: Vec<SocketAddr> = topology
            .servers
            .iter()
            .filter_map(|(host, port)| resolve(host, *port))
            .collect();
        if servers.is_empty() {
            // Nothing usable: keep routing as before rather than to nowhere.
            tracing::warn!(
                ?topology,
                "topology update names no reachable server; ignored"
            );
            return false;
        }
        let owners = topology.segment_owners.as_ref().map(|segments| {
            segments
                .iter()
                .map(|owners| {
                    owners
                        .iter()
                        .filter_map(|&owner| usize::try_from(owner).ok())
                        .collect()
                })
                .collect()
        });
        let mut view = self.view.write();
        let changed = view.servers != servers;
        *view = View {
            id: topology.id,
            servers,
            owners,
        };
        changed
    }
}

/// A server's address from its host (an IP, or a name looked up now) and port.
fn resolve(host: &str, port: u16) -> Option<SocketAddr> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, port));
    }
    (host, port).to_socket_addrs().ok()?.next()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topology(id: i32, ports: &[u16], owners: Option<Vec<Vec<u32>>>) -> Topology {
        Topology {
            id,
            servers: ports.iter().map(|p| ("127.0.0.1".to_owned(), *p)).collect(),
            segment_owners: owners,
        }
    }

    // Proves a keyed request goes to its segment's primary, then its backup, then the rest,
    // with the segment computed as Infinispan's client computes it (proto "key1" is in
    // segment 3 of 8, as the traced Java client routed it).
    #[test]
    fn keys_go_to_their_owners_in_order() {
        let routing = Routing::new(vec![SocketAddr::from(([127, 0, 0, 1], 1))]);
        let mut owners = vec![vec![0, 1]; 8];
        owners[3] = vec![2, 0];
        assert!(routing.update(&topology(5, &[11, 12, 13], Some(owners))));
        assert_eq!(routing.topology_id(), 5);
        let key1 = [0x4a, 0x04, b'k', b'e', b'y', b'1'];
        let ports: Vec<u16> = routing
            .candidates(Some(&key1))
            .iter()
            .map(SocketAddr::port)
            .collect();
        assert_eq!(ports, [13, 11, 12]);
        // Without a key: every server, in turn.
        let first = routing.candidates(None);
        let second = routing.candidates(None);
        assert_eq!(first.len(), 3);
        assert_ne!(first[0], second[0]);
        // The same servers again: not a change of the list.
        assert!(!routing.update(&topology(6, &[11, 12, 13], None)));
        assert_eq!(routing.segment_count(), None);
    }

    // Proves an update naming no usable server is ignored.
    #[test]
    fn empty_update_ignored() {
        let server = SocketAddr::from(([127, 0, 0, 1], 1));
        let routing = Routing::new(vec![server]);
        assert!(!routing.update(&topology(5, &[], None)));
        assert_eq!(routing.servers(), [server]);
        assert_eq!(routing.topology_id(), NO_TOPOLOGY);
    }
}
