//! Which accepted connections are served: at most `connections-max` at once, and at most
//! `connections-per-address-max` from one client IP address, so that one peer opening
//! sockets cannot take every slot and lock the others out.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::ServerContext;

/// The connections open per client address.
#[derive(Debug, Default)]
pub(crate) struct Admission {
    /// Open connections by client address; an address leaves when its last one closes, so
    /// the map holds at most `connections-max` entries.
    per_address: parking_lot::Mutex<HashMap<IpAddr, usize>>,
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// `connections-max` connections are open.
    Full,
    /// Its address holds `connections-per-address-max` of them.
    AddressFull,
}

/// A connection's place among those served; dropping it gives the place back.
#[derive(Debug)]
pub(crate) struct Slot {
    context: Arc<ServerContext>,
    address: IpAddr,
}

/// The address a peer is counted under: an IPv4 client reaching an IPv6 socket arrives as
/// `::ffff:a.b.c.d`, and must count as `a.b.c.d`.
fn counted_address(peer: SocketAddr) -> IpAddr {
    peer.ip().to_canonical()
}

/// Admits a connection from `peer`, or says why not.
pub(crate) fn admit(context: &Arc<ServerContext>, peer: SocketAddr) -> Result<Slot, Refusal> {
    let address = counted_address(peer);
    let mut per_address = context.admission.per_address.lock();
    if context.connected_clients.load(Ordering::Relaxed) >= context.settings.connections_max {
        return Err(Refusal::Full);
    }
    let open = per_address.entry(address).or_insert(0);
    if *open >= context.settings.connections_per_address() {
        return Err(Refusal::AddressFull);
    }
    *open += 1;
    // Counted here, under the lock, rather than once the connection's task runs: the
    // accept loop may accept many connections before any of their tasks starts.
    context.connected_clients.fetch_add(1, Ordering::Relaxed);
    context.total_connections.fetch_add(1, Ordering::Relaxed);
    Ok(Slot {
        context: Arc::clone(context),
        address,
    })
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut per_address = self.context.admission.per_address.lock();
        if let Some(open) = per_address.get_mut(&self.address) {
            *open -= 1;
            if *open == 0 {
                per_address.remove(&self.address);
            }
        }
        self.context
            .connected_clients
            .fetch_sub(1, Ordering::Relaxed);
    }
}
