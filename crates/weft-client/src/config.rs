//! How a client connects, routes, retries and caches: [`ClientConfig`] and
//! [`NearCacheConfig`], with the defaults the Java client uses where it has one.

use std::net::SocketAddr;
use std::time::Duration;

use weft_hotrod::MediaType;

use crate::error::{Error, Result};

/// The protocol version spoken by default: 4.0, the newest that Infinispan 15.0 servers
/// know (a 15.1+ server and Weft speak it too).
pub const PROTOCOL_VERSION_DEFAULT: u8 = 40;
/// The oldest protocol version this client speaks: 3.0, the first whose PING tells the
/// server's version.
pub const PROTOCOL_VERSION_MIN: u8 = 30;

/// How much of the cluster the client is told about, and so how it routes requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intelligence {
    /// No topology: requests go round-robin over the configured servers.
    Basic,
    /// The server list is kept up to date from responses; requests go round-robin over it.
    TopologyAware,
    /// The server list and each segment's owners: keyed requests go to their key's primary
    /// (Infinispan's MurmurHash3 segments), then to its other owners.
    HashDistributionAware,
}

impl Intelligence {
    /// The byte a request header carries.
    #[must_use]
    pub const fn code(self) -> u8 {
        match self {
            Self::Basic => 1,
            Self::TopologyAware => 2,
            Self::HashDistributionAware => 3,
        }
    }
}

/// What a client needs to know. Build one with [`ClientConfig::new`] and the `with_*`
/// methods; [`ClientConfig::validate`] checks it (the client does when it starts).
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The servers to start from (at least one). With topology awareness the list is replaced
    /// by the one the cluster sends.
    pub servers: Vec<SocketAddr>,
    /// Protocol version (`major * 10 + minor`), from [`PROTOCOL_VERSION_MIN`] to 41.
    pub protocol_version: u8,
    /// How requests are routed.
    pub intelligence: Intelligence,
    /// Longest wait for a TCP connection to open (and its first PING to answer).
    pub connect_timeout: Duration,
    /// Longest wait for a response.
    pub request_timeout: Duration,
    /// Connections kept open per server; requests are pipelined over them.
    pub connections_per_server: usize,
    /// Requests in flight on one connection at most; more wait for one to finish.
    pub in_flight_per_connection_max: usize,
    /// Further attempts of a failed request on other servers (or the same one, reconnected).
    pub retries_max: u32,
    /// Pause before the first retry; doubled for each further one.
    pub retry_backoff: Duration,
    /// Media type of keys sent (`Unspecified`: the cache's own, bytes stored as sent).
    pub key_media_type: MediaType,
    /// Media type of values sent.
    pub value_media_type: MediaType,
    /// Events buffered per client listener before the listener is closed as too slow.
    pub listener_queue_capacity: usize,
    /// A near cache for every cache this client opens, if set.
    pub near_cache: Option<NearCacheConfig>,
}

impl ClientConfig {
    /// A configuration for these servers with the defaults: protocol 4.0, hash-aware
    /// routing, 5 s to connect, 10 s per request, 2 connections per server, 3 retries.
    #[must_use]
    pub fn new(servers: impl IntoIterator<Item = SocketAddr>) -> Self {
        Self {
            servers: servers.into_iter().collect(),
            protocol_version: PROTOCOL_VERSION_DEFAULT,
            intelligence: Intelligence::HashDistributionAware,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            connections_per_server: 2,
            in_flight_per_connection_max: 1024,
            retries_max: 3,
            retry_backoff: Duration::from_millis(50),
            key_media_type: MediaType::Unspecified,
            value_media_type: MediaType::Unspecified,
            listener_queue_capacity: 4096,
            near_cache: None,
        }
    }

    /// With this routing.
    #[must_use]
    pub fn with_intelligence(mut self, intelligence: Intelligence) -> Self {
        self.intelligence = intelligence;
        self
    }

    /// With this protocol version.
    #[must_use]
    pub fn with_protocol_version(mut self, version: u8) -> Self {
        self.protocol_version = version;
        self
    }

    /// With these timeouts.
    #[must_use]
    pub fn with_timeouts(mut self, connect: Duration, request: Duration) -> Self {
        self.connect_timeout = connect;
        self.request_timeout = request;
        self
    }

    /// With this many retries, the first after `backoff`.
    #[must_use]
    pub fn with_retries(mut self, retries_max: u32, backoff: Duration) -> Self {
        self.retries_max = retries_max;
        self.retry_backoff = backoff;
        self
    }

    /// With this many connections per server.
    #[must_use]
    pub fn with_connections_per_server(mut self, connections: usize) -> Self {
        self.connections_per_server = connections;
        self
    }

    /// With these media types for keys and values.
    #[must_use]
    pub fn with_media_types(mut self, key: MediaType, value: MediaType) -> Self {
        self.key_media_type = key;
        self.value_media_type = value;
        self
    }

    /// With a near cache for every cache opened.
    #[must_use]
    pub fn with_near_cache(mut self, near_cache: NearCacheConfig) -> Self {
        self.near_cache = Some(near_cache);
        self
    }

    /// Checks that the configuration can work.
    ///
    /// # Errors
    /// [`Error::Config`] naming the first problem.
    pub fn validate(&self) -> Result<()> {
        let fail = |reason: String| Err(Error::Config(reason));
        if self.servers.is_empty() {
            return fail("no server given".into());
        }
        if !(PROTOCOL_VERSION_MIN..=weft_hotrod::VERSION_MAX).contains(&self.protocol_version) {
            return fail(format!(
                "protocol version {} is not between {PROTOCOL_VERSION_MIN} and {}",
                self.protocol_version,
                weft_hotrod::VERSION_MAX
            ));
        }
        if self.connections_per_server == 0 || self.in_flight_per_connection_max == 0 {
            return fail("connections per server and requests in flight must be at least 1".into());
        }
        if self.connect_timeout.is_zero() || self.request_timeout.is_zero() {
            return fail("timeouts must be longer than zero".into());
        }
        if self.listener_queue_capacity == 0 {
            return fail("the listener queue capacity must be at least 1".into());
        }
        if let Some(near) = &self.near_cache {
            near.validate()?;
        }
        Ok(())
    }
}

/// A near cache: values read recently kept in the client, served without a round trip
/// while they are known to be no older than `staleness_bound` (see the crate docs for the
/// exact guarantee).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NearCacheConfig {
    /// Entries kept at most; past it, an arbitrary entry makes room.
    pub entries_max: usize,
    /// The most a value served from the near cache may lag the server: a read served from
    /// it returns a value that was the server's current one at some instant no earlier than
    /// this long before the read began.
    pub staleness_bound: Duration,
    /// How often each invalidation connection is confirmed with a PING. Shorter than the
    /// bound (a quarter of it by default) so that entries stay servable between confirmations.
    pub heartbeat_interval: Duration,
}

impl NearCacheConfig {
    /// A near cache of `entries_max` entries with this staleness bound, confirmed every
    /// quarter of it.
    #[must_use]
    pub fn new(entries_max: usize, staleness_bound: Duration) -> Self {
        Self {
            entries_max,
            staleness_bound,
            heartbeat_interval: staleness_bound / 4,
        }
    }

    /// Checks the near cache can work.
    ///
    /// # Errors
    /// [`Error::Config`] naming the problem.
    pub fn validate(&self) -> Result<()> {
        if self.entries_max == 0 {
            return Err(Error::Config(
                "a near cache holds at least one entry".into(),
            ));
        }
        if self.staleness_bound.is_zero() {
            return Err(Error::Config(
                "the staleness bound must be longer than zero".into(),
            ));
        }
        if self.heartbeat_interval.is_zero() || self.heartbeat_interval >= self.staleness_bound {
            return Err(Error::Config(
                "the heartbeat interval must be longer than zero and shorter than the staleness bound"
                    .into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the defaults validate and each unusable setting is refused.
    #[test]
    fn validation() {
        let server = SocketAddr::from(([127, 0, 0, 1], 11222));
        assert!(ClientConfig::new([server]).validate().is_ok());
        assert!(ClientConfig::new([]).validate().is_err());
        assert!(
            ClientConfig::new([server])
                .with_protocol_version(28)
                .validate()
                .is_err()
        );
        assert!(
            ClientConfig::new([server])
                .with_connections_per_server(0)
                .validate()
                .is_err()
        );
        let near = NearCacheConfig::new(10, Duration::from_millis(100));
        assert!(
            ClientConfig::new([server])
                .with_near_cache(near)
                .validate()
                .is_ok()
        );
        let near = NearCacheConfig {
            heartbeat_interval: Duration::from_millis(100),
            ..near
        };
        assert!(near.validate().is_err());
        assert!(
            NearCacheConfig::new(0, Duration::from_secs(1))
                .validate()
                .is_err()
        );
    }
}
