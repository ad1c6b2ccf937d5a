//! A member's cluster settings: the same ones the `weft` server reads from its `[server]`
//! section, so that an embedded member and a server member are configured alike.

use std::net::SocketAddr;

use weft_cluster::Location;

/// Inbound cluster connections open at once by default.
pub const CONNECTIONS_MAX_DEFAULT: usize = crate::transport::CONNECTIONS_MAX_DEFAULT;
/// Entries per state-transfer request by default.
pub const STATE_TRANSFER_CHUNK_ENTRIES_DEFAULT: u32 = 1_000;
/// State-transfer rate limit by default, in bytes per second.
pub const STATE_TRANSFER_BYTES_PER_SECOND_DEFAULT: u64 = 64 * 1024 * 1024;

/// How one member takes part in a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GridConfig {
    /// This member's name, unique in the cluster.
    pub name: String,
    /// The cluster address: UDP for membership and TCP for everything else, one port.
    pub listen: SocketAddr,
    /// Members to join, as `host:port` of their cluster addresses (names resolved at start).
    pub join: Vec<String>,
    /// The secret the members share; every cluster connection proves it (empty = none).
    pub secret: Option<String>,
    /// Largest frame accepted on the cluster port.
    pub frame_bytes_max: usize,
    /// Inbound cluster connections open at once.
    pub connections_max: usize,
    /// Where this member runs: site, rack and machine (owners are spread across them).
    pub location: Location,
    /// Entries per state-transfer request.
    pub state_transfer_chunk_entries: u32,
    /// State-transfer rate limit in bytes per second (0 = none).
    pub state_transfer_bytes_per_second: u64,
}

impl GridConfig {
    /// A member named `name` listening at `listen` and joining `join`, every other setting
    /// at its default.
    #[must_use]
    pub fn new(name: impl Into<String>, listen: SocketAddr, join: Vec<String>) -> Self {
        Self {
            name: name.into(),
            listen,
            join,
            secret: None,
            frame_bytes_max: weft_cluster::wire::FRAME_BYTES_MAX,
            connections_max: CONNECTIONS_MAX_DEFAULT,
            location: Location::default(),
            state_transfer_chunk_entries: STATE_TRANSFER_CHUNK_ENTRIES_DEFAULT,
            state_transfer_bytes_per_second: STATE_TRANSFER_BYTES_PER_SECOND_DEFAULT,
        }
    }

    /// The same, with the cluster `secret`.
    #[must_use]
    pub fn secret(mut self, secret: impl Into<String>) -> Self {
        self.secret = Some(secret.into());
        self
    }
}
