//! The server's configuration file: a `[server]` section for the endpoint and one
//! `[caches.NAME]` table per cache (the same `CacheConfig` embedded users build in code).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde::Deserialize;
use weft_core::config::{ConfigError, from_toml};
use weft_core::{CacheConfig, DEFAULT_CACHE_NAME, ManagerConfig};

/// Where file stores live unless `data-dir` says otherwise: directly for a node on its own,
/// in a directory per node name for a clustered node (see [`ServerSection::data_dir`]).
pub const DATA_DIR_DEFAULT: &str = "./weft-data";
/// The default listen address: every protocol on one port, loopback only.
pub const BIND_DEFAULT: &str = "127.0.0.1:11222";
/// Default cap on one client's pending input (a single command, or a pipeline burst).
pub const CLIENT_INPUT_BYTES_MAX_DEFAULT: usize = 1 << 30;
/// Default cap on bytes of replies buffered for a client's request before it is closed.
pub const CLIENT_OUTPUT_BYTES_MAX_DEFAULT: usize = 64 << 20;
/// Default cap on pushes (pub/sub messages, tracking invalidations) queued for a RESP
/// connection: Redis' `client-output-buffer-limit pubsub` hard limit, 32 MiB.
pub const PUBSUB_OUTPUT_BYTES_MAX_DEFAULT: usize = 32 << 20;

/// Default time a new connection has to send its whole first request: long enough for any
/// client that connects in order to send something, short enough that sockets opened and
/// left silent cannot hold `connections-max` slots for long.
pub const FIRST_REQUEST_TIMEOUT_SECS_DEFAULT: u64 = 10;
/// Default time a request that has begun to arrive has to arrive whole (HTTP: a head; a
/// body, counted from the end of its head), before the allowance `request-min-bytes-per-second`
/// adds for what it sends.
pub const REQUEST_TIMEOUT_SECS_DEFAULT: u64 = 30;
/// Default rate that earns a request more time: each byte received extends its deadline by
/// `1 / rate` seconds, so large requests sent at a useful speed are never cut off while one
/// trickled a byte at a time is (as Apache's `mod_reqtimeout` `MinRate`, whose default is 500).
pub const REQUEST_MIN_BYTES_PER_SECOND_DEFAULT: u64 = 1024;
/// Without `connections-per-address-max`, one client address may hold this fraction of
/// `connections-max` (one divided by it).
pub const CONNECTIONS_PER_ADDRESS_DIVISOR: usize = 4;

/// The `[server]` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct ServerSection {
    /// Address to listen on; every protocol shares it.
    #[serde(deserialize_with = "socket_address")]
    pub bind: SocketAddr,
    /// Largest RESP bulk string accepted, in bytes (Redis' proto-max-bulk-len).
    pub resp_bulk_bytes_max: usize,
    /// Largest multibulk element count accepted.
    pub resp_multibulk_length_max: usize,
    /// Most connections served at once; further ones are closed on accept.
    pub connections_max: usize,
    /// RESP databases (`SELECT 0` … `SELECT n-1`, Redis' `databases`). A database no cache
    /// declares (`resp-database`) gets a local cache `db<n>` when first selected, configured
    /// as database 0's; on a clustered server, declare them.
    pub resp_databases: u32,
    /// Most connections served at once from one client IP address (loopback included);
    /// absent = a quarter of `connections_max` (see [`ServerSection::connections_per_address`]).
    pub connections_per_address_max: Option<usize>,
    /// Seconds a new connection has to send its whole first request (HTTP: its head) before
    /// it is closed. Established connections may then idle as long as they like (except HTTP
    /// keep-alive, bounded by `request_timeout_secs`).
    #[serde(deserialize_with = "positive_secs")]
    pub first_request_timeout_secs: u64,
    /// Seconds a request that has begun to arrive has to arrive whole, plus the allowance
    /// `request_min_bytes_per_second` earns; past it the connection is closed (HTTP: `408`
    /// for a body).
    #[serde(deserialize_with = "positive_secs")]
    pub request_timeout_secs: u64,
    /// Each byte of a request received adds `1 / this` seconds to its deadline; 0 = none (a
    /// request must arrive whole within the timeout, however large).
    pub request_min_bytes_per_second: u64,
    /// The password of the user `default` on every protocol (RESP AUTH/HELLO, Hot Rod and
    /// memcached SASL, memcached's text login, REST Basic); absent = no authentication. Not
    /// with `[security] users-file`.
    pub password: Option<String>,
    /// Seconds to wait for connections to finish on shutdown.
    pub shutdown_grace_secs: u64,
    /// Most bytes of one unfinished RESP request a connection may hold (Redis'
    /// `client-query-buffer-limit`); beyond it the connection is closed.
    pub client_input_bytes_max: usize,
    /// Most bytes of replies a RESP connection may buffer for one request (Redis'
    /// `client-output-buffer-limit`); a reply that outgrows it closes the connection.
    pub client_output_bytes_max: usize,
    /// Most bytes of pushes (pub/sub messages, tracking invalidations) a RESP connection may
    /// leave unread (Redis' `client-output-buffer-limit pubsub` hard limit); past it the
    /// connection is closed, and publishers never wait.
    pub pubsub_output_bytes_max: usize,
    /// Largest Hot Rod key or value accepted, in bytes; larger declared lengths get an
    /// error response and the connection is closed.
    pub hotrod_value_bytes_max: usize,
    /// Directory under which file stores keep their data (one directory per cache); absent =
    /// the default of [`ServerSection::data_dir`].
    pub data_dir: Option<std::path::PathBuf>,
    /// The cache memcached clients read and write (by default `default`, the cache RESP
    /// database 0 uses, so memcached entries are visible through RESP and REST).
    pub memcached_cache: String,
    /// A second address where every connection is memcached (text or binary, by its first
    /// byte); absent = memcached only on the shared port.
    #[serde(deserialize_with = "optional_socket_address")]
    pub memcached_listen: Option<SocketAddr>,
    /// Largest memcached item, counted as memcached counts it (memcached's `-I`); larger
    /// stores get `SERVER_ERROR object too large for cache`. From 1 KiB to 512 MiB.
    #[serde(deserialize_with = "memcached_item_bytes")]
    pub memcached_item_bytes_max: usize,
    /// This node's name in the cluster (unique); by default its `bind` address.
    pub node_name: Option<String>,
    /// UDP address for cluster membership traffic; absent = a node on its own (unless
    /// `join` is given, which implies `127.0.0.1:7800`).
    #[serde(deserialize_with = "optional_socket_address")]
    pub cluster_listen: Option<SocketAddr>,
    /// Nodes to join, as `host:port` of their `cluster-listen` (names are resolved at
    /// start, e.g. a Kubernetes headless service).
    pub join: Vec<String>,
    /// The secret the nodes of a cluster share: each proves it knows it (HMAC-SHA256
    /// challenge and response) when it opens a cluster connection, and signs its membership
    /// datagrams with it; nothing else from a peer is read before. Absent = any process
    /// that reaches the cluster port is taken for a node (the log says so at start).
    pub cluster_secret: Option<String>,
    /// Largest frame accepted on the cluster port (memory is taken as its bytes arrive, and
    /// only from a node that proved itself). At least 1 MiB; by default room for one entry
    /// of the largest key and value a cache takes.
    #[serde(deserialize_with = "cluster_frame_bytes")]
    pub cluster_frame_bytes_max: usize,
    /// Inbound cluster connections open at once; more are closed as they arrive.
    pub cluster_connections_max: usize,
    /// Site (data center) of this node, for placing backups.
    pub site: Option<String>,
    /// Rack of this node.
    pub rack: Option<String>,
    /// Machine of this node (nodes on one machine fail together).
    pub machine: Option<String>,
    /// Entries per state-transfer request (a chunk of a segment).
    pub state_transfer_chunk_entries: u32,
    /// Most bytes per second this node fetches by state transfer (0 = unlimited), so that a
    /// rebalance leaves the network and the sending nodes room for client traffic.
    pub state_transfer_bytes_per_second: u64,
    /// Milliseconds between two failure-detection probes of another node by this one.
    #[serde(deserialize_with = "cluster_probe_period_ms")]
    pub cluster_probe_period_ms: u64,
    /// Milliseconds a probe waits for its direct answer before other nodes are asked to
    /// probe indirectly; shorter than `cluster-probe-period-ms` (checked at start).
    #[serde(deserialize_with = "cluster_probe_timeout_ms")]
    pub cluster_probe_timeout_ms: u64,
    /// Milliseconds a suspected node has to refute it before it is declared down (its keys
    /// then move to the others); at least `cluster-probe-period-ms` (checked at start).
    #[serde(deserialize_with = "cluster_suspect_timeout_ms")]
    pub cluster_suspect_timeout_ms: u64,
    /// `[server.tls]`: TLS on the client port(s); absent = plaintext only.
    pub tls: Option<TlsSection>,
    /// `[server.cluster-tls]`: mutual TLS between members; absent = plaintext.
    pub cluster_tls: Option<ClusterTlsSection>,
}

/// The `[server.cluster-tls]` section: every cluster connection is mutual TLS, each member
/// presenting a certificate the cluster's CA signed (with the `serverAuth` and `clientAuth`
/// usages, or none) and checking the other's. Relative paths are relative to the
/// configuration file's directory.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ClusterTlsSection {
    /// PEM file with this member's certificate chain, leaf first.
    pub certificate: PathBuf,
    /// PEM file with its private key.
    pub key: PathBuf,
    /// PEM file with the cluster's CA certificate(s).
    pub ca: PathBuf,
}

impl ClusterTlsSection {
    fn resolve_in(&mut self, dir: &Path) {
        for path in [&mut self.certificate, &mut self.key, &mut self.ca] {
            if path.is_relative() {
                *path = dir.join(&*path);
            }
        }
    }
}

/// Whether TLS clients must present a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClientAuth {
    /// No certificate is asked for.
    None,
    /// A certificate is asked for; a client without one is served, one with a certificate
    /// the client CA did not sign is refused.
    Optional,
    /// Only clients with a certificate signed by the client CA complete the handshake.
    Required,
}

/// Default seconds between two checks of the TLS files for a change.
pub const TLS_RELOAD_CHECK_SECS_DEFAULT: u64 = 10;

/// The `[server.tls]` section. Relative paths are relative to the configuration file's
/// directory.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TlsSection {
    /// PEM file with the server's certificate chain, leaf first.
    pub certificate: PathBuf,
    /// PEM file with the certificate's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// PEM file with the CA certificate(s) client certificates must chain to.
    #[serde(default)]
    pub client_ca: Option<PathBuf>,
    /// Whether clients must present a certificate: by default `required` when `client-ca`
    /// is set, `none` otherwise (see [`TlsSection::client_auth`]).
    #[serde(default, rename = "client-auth")]
    pub client_auth_mode: Option<ClientAuth>,
    /// Whether plaintext clients are still served on the TLS-enabled port(s) (TLS and
    /// plaintext clients share port 11222, told apart by their first byte). Default true.
    #[serde(default = "default_true")]
    pub plaintext: bool,
    /// Seconds between two checks of the files for a change (which reloads them, as SIGHUP
    /// does); 0 = only on SIGHUP.
    #[serde(default = "tls_reload_check_secs")]
    pub reload_check_secs: u64,
}

fn default_true() -> bool {
    true
}

fn tls_reload_check_secs() -> u64 {
    TLS_RELOAD_CHECK_SECS_DEFAULT
}

impl TlsSection {
    /// A section serving `certificate` and `key`, with the defaults for the rest.
    #[must_use]
    pub fn new(certificate: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        Self {
            certificate: certificate.into(),
            key: key.into(),
            client_ca: None,
            client_auth_mode: None,
            plaintext: true,
            reload_check_secs: TLS_RELOAD_CHECK_SECS_DEFAULT,
        }
    }

    /// Whether clients must present a certificate, defaults applied.
    #[must_use]
    pub fn client_auth(&self) -> ClientAuth {
        self.client_auth_mode
            .unwrap_or(if self.client_ca.is_some() {
                ClientAuth::Required
            } else {
                ClientAuth::None
            })
    }

    /// Makes relative paths relative to `dir`.
    fn resolve_in(&mut self, dir: &Path) {
        for path in [&mut self.certificate, &mut self.key]
            .into_iter()
            .chain(self.client_ca.as_mut())
        {
            if path.is_relative() {
                *path = dir.join(&*path);
            }
        }
    }

    pub(crate) fn check(&self) -> Result<(), String> {
        if self.client_ca.is_none() && self.client_auth() != ClientAuth::None {
            return Err(
                "`client-auth` needs `client-ca`, the CA client certificates must chain to"
                    .to_owned(),
            );
        }
        Ok(())
    }
}

/// The cluster port when `join` is given without `cluster-listen`.
pub const CLUSTER_LISTEN_DEFAULT: &str = "127.0.0.1:7800";

impl ServerSection {
    /// The cluster address, when this node is clustered.
    #[must_use]
    pub fn cluster_address(&self) -> Option<SocketAddr> {
        self.cluster_listen.or_else(|| {
            (!self.join.is_empty())
                .then(|| CLUSTER_LISTEN_DEFAULT.parse().ok())
                .flatten()
        })
    }

    /// This node's settings as a grid member named `name`, when it is clustered.
    #[must_use]
    pub fn grid_config(&self, name: &str) -> Option<weft_grid::GridConfig> {
        let listen = self.cluster_address()?;
        let mut config = weft_grid::GridConfig::new(name, listen, self.join.clone());
        config.secret = self.cluster_secret.clone();
        config.frame_bytes_max = self.cluster_frame_bytes_max;
        config.connections_max = self.cluster_connections_max;
        config.location = weft_cluster::Location {
            site: self.site.clone(),
            rack: self.rack.clone(),
            machine: self.machine.clone(),
        };
        config.state_transfer_chunk_entries = self.state_transfer_chunk_entries;
        config.state_transfer_bytes_per_second = self.state_transfer_bytes_per_second;
        config.failure_detection = weft_grid::config::FailureDetection {
            probe_period: Duration::from_millis(self.cluster_probe_period_ms),
            probe_timeout: Duration::from_millis(self.cluster_probe_timeout_ms),
            suspect_timeout: Duration::from_millis(self.cluster_suspect_timeout_ms),
        };
        Some(config)
    }

    /// The directory this node's file stores live under: `data-dir` when set; otherwise
    /// [`DATA_DIR_DEFAULT`] for a node on its own, and a directory named after the node in it
    /// for a clustered node (`./weft-data/a` for node `a`), so that nodes started from one
    /// working directory never share their stores.
    #[must_use]
    pub fn data_dir(&self, node_name: &str) -> PathBuf {
        match &self.data_dir {
            Some(configured) => configured.clone(),
            None if self.cluster_address().is_some() => {
                Path::new(DATA_DIR_DEFAULT).join(node_dir_name(node_name))
            }
            None => PathBuf::from(DATA_DIR_DEFAULT),
        }
    }
}

/// A node name as a directory name: letters, digits, `-`, `_` and `.` are kept, anything
/// else (`:` of an address, `/`, spaces) becomes `_`; a name of dots only (`.`, `..`) or
/// none becomes underscores. Two names that map to one directory are kept apart by its lock.
fn node_dir_name(node_name: &str) -> String {
    let name: String = node_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.chars().all(|c| c == '.') {
        "_".repeat(name.len().max(1))
    } else {
        name
    }
}

impl ServerSection {
    /// Most connections one client address may hold: `connections-per-address-max`, or a
    /// quarter of `connections-max`, and at least one.
    #[must_use]
    pub fn connections_per_address(&self) -> usize {
        self.connections_per_address_max
            .unwrap_or(self.connections_max / CONNECTIONS_PER_ADDRESS_DIVISOR)
            .max(1)
    }
}

impl Default for ServerSection {
    fn default() -> Self {
        Self {
            bind: BIND_DEFAULT
                .parse()
                .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 11222))),
            resp_bulk_bytes_max: 512 << 20,
            resp_multibulk_length_max: 1024 * 1024,
            connections_max: 10_000,
            resp_databases: RESP_DATABASES_DEFAULT,
            connections_per_address_max: None,
            first_request_timeout_secs: FIRST_REQUEST_TIMEOUT_SECS_DEFAULT,
            request_timeout_secs: REQUEST_TIMEOUT_SECS_DEFAULT,
            request_min_bytes_per_second: REQUEST_MIN_BYTES_PER_SECOND_DEFAULT,
            password: None,
            shutdown_grace_secs: 5,
            client_input_bytes_max: CLIENT_INPUT_BYTES_MAX_DEFAULT,
            client_output_bytes_max: CLIENT_OUTPUT_BYTES_MAX_DEFAULT,
            pubsub_output_bytes_max: PUBSUB_OUTPUT_BYTES_MAX_DEFAULT,
            hotrod_value_bytes_max: 512 << 20,
            data_dir: None,
            memcached_cache: DEFAULT_CACHE_NAME.to_owned(),
            memcached_listen: None,
            memcached_item_bytes_max: weft_memcached::DEFAULT_ITEM_BYTES_MAX,
            node_name: None,
            cluster_listen: None,
            join: Vec::new(),
            cluster_secret: None,
            cluster_frame_bytes_max: weft_cluster::wire::FRAME_BYTES_MAX,
            cluster_connections_max: weft_grid::config::CONNECTIONS_MAX_DEFAULT,
            tls: None,
            cluster_tls: None,
            site: None,
            rack: None,
            machine: None,
            state_transfer_chunk_entries: weft_grid::config::STATE_TRANSFER_CHUNK_ENTRIES_DEFAULT,
            state_transfer_bytes_per_second:
                weft_grid::config::STATE_TRANSFER_BYTES_PER_SECOND_DEFAULT,
            cluster_probe_period_ms: millis(weft_grid::config::PROBE_PERIOD_DEFAULT),
            cluster_probe_timeout_ms: millis(weft_grid::config::PROBE_TIMEOUT_DEFAULT),
            cluster_suspect_timeout_ms: millis(weft_grid::config::SUSPECT_TIMEOUT_DEFAULT),
        }
    }
}

fn socket_address<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    let text = String::deserialize(d)?;
    text.parse().map_err(|_| {
        serde::de::Error::custom(format!(
            "invalid address `{text}`: expected IP:PORT, e.g. 127.0.0.1:11222"
        ))
    })
}

/// Largest connection timeout, ten years: as good as none, and far enough from the clock's
/// limits that deadlines computed from it cannot overflow.
pub const TIMEOUT_SECS_MAX: u64 = 10 * 365 * 24 * 60 * 60;

/// A timeout in whole seconds, at least one (a zero timeout would close every connection at
/// once) and at most [`TIMEOUT_SECS_MAX`].
fn positive_secs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let secs = u64::deserialize(d)?;
    if !(1..=TIMEOUT_SECS_MAX).contains(&secs) {
        return Err(serde::de::Error::custom(format!(
            "a timeout must be at least 1 second and at most {TIMEOUT_SECS_MAX}"
        )));
    }
    Ok(secs)
}

/// Smallest `memcached-item-bytes-max` (memcached refuses `-I` below 1 KiB).
pub const MEMCACHED_ITEM_BYTES_MIN: usize = 1024;

fn memcached_item_bytes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    let bytes = usize::deserialize(d)?;
    if !(MEMCACHED_ITEM_BYTES_MIN..=weft_core::cache::VALUE_BYTES_MAX).contains(&bytes) {
        return Err(serde::de::Error::custom(format!(
            "memcached-item-bytes-max must be between {MEMCACHED_ITEM_BYTES_MIN} and {} bytes",
            weft_core::cache::VALUE_BYTES_MAX
        )));
    }
    Ok(bytes)
}

fn cluster_frame_bytes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    let bytes = usize::deserialize(d)?;
    let max = weft_cluster::wire::FRAME_BYTES_MAX;
    if !((1 << 20)..=max).contains(&bytes) {
        return Err(serde::de::Error::custom(format!(
            "cluster-frame-bytes-max must be between 1048576 and {max} bytes"
        )));
    }
    Ok(bytes)
}

/// Whole milliseconds of `duration` (the grid's limits are far below `u64::MAX` of them).
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Milliseconds named `name`, between `min` and `max`.
fn millis_within<'de, D: serde::Deserializer<'de>>(
    d: D,
    name: &str,
    min: Duration,
    max: Duration,
) -> Result<u64, D::Error> {
    let ms = u64::deserialize(d)?;
    if !(millis(min)..=millis(max)).contains(&ms) {
        return Err(serde::de::Error::custom(format!(
            "{name} must be between {} and {} milliseconds",
            millis(min),
            millis(max)
        )));
    }
    Ok(ms)
}

fn cluster_probe_period_ms<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    use weft_grid::config::{PROBE_PERIOD_MAX, PROBE_PERIOD_MIN};
    millis_within(
        d,
        "cluster-probe-period-ms",
        PROBE_PERIOD_MIN,
        PROBE_PERIOD_MAX,
    )
}

fn cluster_probe_timeout_ms<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    use weft_grid::config::{PROBE_PERIOD_MAX, PROBE_TIMEOUT_MIN};
    // Shorter than the probe period too, which `FailureDetection::check` sees at start.
    millis_within(
        d,
        "cluster-probe-timeout-ms",
        PROBE_TIMEOUT_MIN,
        PROBE_PERIOD_MAX,
    )
}

fn cluster_suspect_timeout_ms<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    use weft_grid::config::{SUSPECT_TIMEOUT_MAX, SUSPECT_TIMEOUT_MIN};
    millis_within(
        d,
        "cluster-suspect-timeout-ms",
        SUSPECT_TIMEOUT_MIN,
        SUSPECT_TIMEOUT_MAX,
    )
}

fn optional_socket_address<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<SocketAddr>, D::Error> {
    socket_address(d).map(Some)
}

/// The whole configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServerConfig {
    /// Endpoint settings.
    #[serde(default)]
    pub server: ServerSection,
    /// Users and authentication.
    #[serde(default)]
    pub security: SecuritySection,
    /// Caches by name; a `default` cache mapped to RESP database 0 is added if absent.
    #[serde(default)]
    pub caches: BTreeMap<String, CacheConfig>,
}

/// RESP databases a server has unless configured otherwise (Redis' default).
pub const RESP_DATABASES_DEFAULT: u32 = 16;

/// The `[security]` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct SecuritySection {
    /// The users file (`weft user create …` writes it); when set, every client must
    /// authenticate as one of its users. Relative to the configuration file's directory.
    /// Re-read when it changes.
    pub users_file: Option<PathBuf>,
    /// Protected mode (Redis' name, made strict): a server whose client port is reachable
    /// from other machines (`bind` not loopback) with no authentication (no users file, no
    /// `password`), or whose cluster port is with neither `cluster-secret` nor
    /// `[server.cluster-tls]`, refuses to start. `false` lets it start open.
    pub protected_mode: bool,
    /// With a users file, whether requests are authorized by role (Infinispan's RBAC): each
    /// operation needs a permission one of the user's roles grants (and, on a cache that
    /// admits only some roles, one of those). `false`: every authenticated user may do
    /// everything.
    pub authorization: bool,
    /// Roles beyond (or redefining) the predefined `admin`, `deployer`, `application`,
    /// `observer` and `monitor`: a role's name and its permissions (`READ`, `WRITE`,
    /// `BULK_READ`, `BULK_WRITE`, `LISTEN`, `EXEC`, `ADMIN`, `CREATE`, `MONITOR`,
    /// `LIFECYCLE`, `ALL`, `ALL_READ`, `ALL_WRITE`).
    pub roles: BTreeMap<String, Vec<String>>,
    /// The roles a group grants, for groups that should not grant the role of their own name
    /// (the default).
    pub group_roles: BTreeMap<String, Vec<String>>,
    /// Whether `/metrics` answers without credentials (for a scraper that has none); with a
    /// users file it otherwise needs MONITOR.
    pub metrics_anonymous: bool,
    /// Bearer tokens (JWTs) an OpenID provider signs: REST's `Authorization: Bearer`, and
    /// SASL OAUTHBEARER (Hot Rod, memcached) on TLS connections.
    pub jwt: Option<JwtSection>,
}

/// The `[security.jwt]` section: where the provider's keys are and what tokens must say.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct JwtSection {
    /// The provider's JWKS document (its `jwks_uri`, saved to a file). Relative to the
    /// configuration file's directory; re-read when it changes.
    pub jwks_file: PathBuf,
    /// The issuer tokens must name (`iss`).
    #[serde(default)]
    pub issuer: Option<String>,
    /// An audience tokens must name (`aud`).
    #[serde(default)]
    pub audience: Option<String>,
    /// The claim naming the user (`sub` when it is absent).
    #[serde(default = "default_user_claim")]
    pub user_claim: String,
    /// The claim listing the user's groups, which map to roles as a users file's groups do
    /// (a dotted path reaches into objects: `realm_access.roles`).
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
}

fn default_user_claim() -> String {
    "preferred_username".to_owned()
}

fn default_groups_claim() -> String {
    "groups".to_owned()
}

impl Default for SecuritySection {
    fn default() -> Self {
        Self {
            users_file: None,
            protected_mode: true,
            authorization: true,
            roles: BTreeMap::new(),
            group_roles: BTreeMap::new(),
            metrics_anonymous: false,
            jwt: None,
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            server: ServerSection::default(),
            security: SecuritySection::default(),
            caches: ManagerConfig::default().caches,
        }
    }
}

impl ServerConfig {
    /// Why protected mode refuses this configuration, if it does (see
    /// [`SecuritySection::protected_mode`]).
    #[must_use]
    pub fn protected_mode_refusal(&self) -> Option<String> {
        if !self.security.protected_mode {
            return None;
        }
        let bind = self.server.bind;
        if !bind.ip().is_loopback()
            && self.security.users_file.is_none()
            && self.security.jwt.is_none()
            && self.server.password.is_none()
        {
            return Some(format!(
                "protected mode: the client port {bind} is reachable from other machines and no client has to authenticate. \
                 Create users (`weft user create NAME --groups admin --users-file users.toml`) and set `[security] users-file = \"users.toml\"`, \
                 or bind a loopback address (127.0.0.1), or set `[security] protected-mode = false` to serve everyone"
            ));
        }
        if let Some(cluster) = self.server.cluster_address()
            && !cluster.ip().is_loopback()
            && self.server.cluster_secret.is_none()
            && self.server.cluster_tls.is_none()
        {
            return Some(format!(
                "protected mode: the cluster port {cluster} is reachable from other machines and any process reaching it would be taken for a member. \
                 Set `cluster-secret` (or WEFT_CLUSTER_SECRET) on every member, and `[server.cluster-tls]` to encrypt, \
                 or set `[security] protected-mode = false`"
            ));
        }
        None
    }

    /// Parses configuration text; `source_name` appears in errors.
    ///
    /// # Errors
    /// The first problem with its file, line and reason.
    pub fn parse(source_name: &str, text: &str) -> Result<Self, ConfigError> {
        let mut config: Self = from_toml(source_name, text)?;
        config.add_default_cache();
        Ok(config)
    }

    /// Reads and parses a configuration file.
    ///
    /// # Errors
    /// If the file cannot be read or is invalid.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("read configuration file {}", path.display()))?;
        let mut config = Self::parse(&path.display().to_string(), &text)?;
        if let Some(dir) = path.parent() {
            if let Some(tls) = config.server.tls.as_mut() {
                tls.resolve_in(dir);
            }
            if let Some(tls) = config.server.cluster_tls.as_mut() {
                tls.resolve_in(dir);
            }
            if let Some(users) = config.security.users_file.as_mut()
                && users.is_relative()
            {
                *users = dir.join(&*users);
            }
            if let Some(jwt) = config.security.jwt.as_mut()
                && jwt.jwks_file.is_relative()
            {
                jwt.jwks_file = dir.join(&jwt.jwks_file);
            }
        }
        Ok(config)
    }

    /// Adds the `default` cache if absent, and maps it to RESP database 0 unless another
    /// cache claims that database.
    fn add_default_cache(&mut self) {
        let database_zero_taken = self.caches.values().any(|c| c.resp_database == Some(0));
        let default = self
            .caches
            .entry(DEFAULT_CACHE_NAME.to_owned())
            .or_default();
        if !database_zero_taken {
            default.resp_database = Some(0);
        }
    }

    /// Whether a cache declares a file store (the server then locks its data directory at
    /// start).
    #[must_use]
    pub fn declares_file_store(&self) -> bool {
        self.caches.values().any(|cache| {
            cache
                .persistence
                .stores
                .iter()
                .any(|store| store.kind == weft_core::StoreKind::File)
        })
    }

    /// The caches as a manager configuration.
    #[must_use]
    pub fn manager_config(&self) -> ManagerConfig {
        ManagerConfig {
            caches: self.caches.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves an empty file gives the embedded default: one `default` cache on database 0.
    #[test]
    fn empty_file_is_the_default() {
        // Must parse: falling back to `ServerConfig::default()` here would make the test
        // pass whatever the parser does with an empty file.
        let config = match ServerConfig::parse("weft.toml", "") {
            Ok(config) => config,
            Err(error) => panic!("an empty file must parse: {error}"),
        };
        assert_eq!(config.server.bind.to_string(), BIND_DEFAULT);
        assert_eq!(
            config.caches.get("default").and_then(|c| c.resp_database),
            Some(0)
        );
        assert_eq!(config.server, ServerSection::default());
    }

    // Proves the connection limits are read from `[server]`.
    #[test]
    fn connection_limits_are_configurable() {
        let text = "[server]\nclient-input-bytes-max = 1000\nclient-output-bytes-max = 2000\n";
        let server = ServerConfig::parse("weft.toml", text).map(|config| config.server);
        assert_eq!(
            server
                .as_ref()
                .map(|s| (s.client_input_bytes_max, s.client_output_bytes_max)),
            Ok((1000, 2000))
        );
        let defaults = ServerSection::default();
        assert_eq!(
            (
                defaults.client_input_bytes_max,
                defaults.client_output_bytes_max
            ),
            (
                CLIENT_INPUT_BYTES_MAX_DEFAULT,
                CLIENT_OUTPUT_BYTES_MAX_DEFAULT
            )
        );
    }

    // Proves the connection deadlines and the per-address limit are read, default to the
    // documented values (a quarter of connections-max per address), and refuse a zero timeout.
    #[test]
    fn connection_deadlines_are_read_and_checked() {
        let defaults = ServerSection::default();
        assert_eq!(
            (
                defaults.first_request_timeout_secs,
                defaults.request_timeout_secs,
                defaults.request_min_bytes_per_second,
                defaults.connections_per_address(),
            ),
            (10, 30, 1024, 2500)
        );
        let text = "[server]\nconnections-max = 8\nfirst-request-timeout-secs = 2\nrequest-timeout-secs = 3\nrequest-min-bytes-per-second = 0\n";
        let server = ServerConfig::parse("weft.toml", text).map(|config| config.server);
        assert_eq!(
            server.as_ref().map(|s| (
                s.first_request_timeout_secs,
                s.request_timeout_secs,
                s.request_min_bytes_per_second,
                s.connections_per_address()
            )),
            Ok((2, 3, 0, 2))
        );
        let text = "[server]\nconnections-max = 2\nconnections-per-address-max = 2\n";
        let server = ServerConfig::parse("weft.toml", text).map(|config| config.server);
        assert_eq!(server.map(|s| s.connections_per_address()), Ok(2));
        let text = "[server]\nconnections-max = 1\n";
        let server = ServerConfig::parse("weft.toml", text).map(|config| config.server);
        assert_eq!(server.map(|s| s.connections_per_address()), Ok(1));
        let error = ServerConfig::parse("weft.toml", "[server]\nrequest-timeout-secs = 0\n")
            .err()
            .map(|e| e.to_string());
        assert!(
            error
                .as_deref()
                .is_some_and(|e| e.starts_with("weft.toml:2:") && e.contains("at least 1 second")),
            "{error:?}"
        );
    }

    // Proves the memcached settings are read, default to the RESP cache, and are checked.
    #[test]
    fn memcached_settings_are_read_and_checked() {
        let defaults = ServerSection::default();
        assert_eq!(defaults.memcached_cache, "default");
        assert_eq!(defaults.memcached_listen, None);
        assert_eq!(defaults.memcached_item_bytes_max, 1 << 20);
        let text = "[server]\nmemcached-cache = \"sessions\"\nmemcached-listen = \"127.0.0.1:11211\"\nmemcached-item-bytes-max = 2097152\n";
        let server = ServerConfig::parse("weft.toml", text).map(|config| config.server);
        assert_eq!(
            server.as_ref().map(|s| (
                s.memcached_cache.as_str(),
                s.memcached_listen.map(|a| a.to_string()),
                s.memcached_item_bytes_max
            )),
            Ok(("sessions", Some("127.0.0.1:11211".to_owned()), 2 << 20))
        );
        let error = ServerConfig::parse("weft.toml", "[server]\nmemcached-item-bytes-max = 10\n")
            .err()
            .map(|e| e.to_string());
        assert!(
            error.as_deref().is_some_and(
                |e| e.starts_with("weft.toml:2:") && e.contains("memcached-item-bytes-max")
            ),
            "{error:?}"
        );
    }

    // Proves the cluster settings are read: no cluster by default, `join` alone implies the
    // default cluster port, and a bad cluster address names its line.
    #[test]
    fn cluster_settings_are_read() {
        assert_eq!(ServerSection::default().cluster_address(), None);
        let text = "[server]\nnode-name = \"a\"\njoin = [\"seed.weft:7800\"]\nsite = \"eu\"\nrack = \"r1\"\nmachine = \"m1\"\n";
        let server = ServerConfig::parse("weft.toml", text).map(|config| config.server);
        let server = server.as_ref().ok();
        assert_eq!(server.and_then(|s| s.node_name.as_deref()), Some("a"));
        assert_eq!(
            server.map(|s| s.join.clone()),
            Some(vec!["seed.weft:7800".to_owned()])
        );
        assert_eq!(
            server
                .and_then(ServerSection::cluster_address)
                .map(|a| a.to_string()),
            Some(CLUSTER_LISTEN_DEFAULT.to_owned())
        );
        assert_eq!(
            server.map(|s| (s.site.as_deref(), s.rack.as_deref(), s.machine.as_deref())),
            Some((Some("eu"), Some("r1"), Some("m1")))
        );
        let text = "[server]\ncluster-listen = \"127.0.0.1:7900\"\n";
        let server = ServerConfig::parse("weft.toml", text).map(|config| config.server);
        assert_eq!(
            server
                .ok()
                .and_then(|s| s.cluster_address())
                .map(|a| a.port()),
            Some(7900)
        );
        let error = ServerConfig::parse("weft.toml", "[server]\ncluster-listen = \"nowhere\"\n")
            .err()
            .map(|e| e.to_string());
        assert!(
            error
                .as_deref()
                .is_some_and(|e| e.starts_with("weft.toml:2:")),
            "{error:?}"
        );
    }

    // Proves the failure-detection timings are read into the grid's settings, default to
    // the grid's defaults, and are refused out of range with the line named.
    #[test]
    fn failure_detection_timings_are_read_and_checked() {
        let defaults = ServerSection::default();
        assert_eq!(
            (
                defaults.cluster_probe_period_ms,
                defaults.cluster_probe_timeout_ms,
                defaults.cluster_suspect_timeout_ms
            ),
            (1_000, 500, 5_000)
        );
        let text = "[server]\njoin = [\"127.0.0.1:7800\"]\ncluster-probe-period-ms = 500\ncluster-probe-timeout-ms = 200\ncluster-suspect-timeout-ms = 2000\n";
        let grid = ServerConfig::parse("weft.toml", text)
            .ok()
            .and_then(|config| config.server.grid_config("a"));
        assert_eq!(
            grid.map(|grid| grid.failure_detection),
            Some(weft_grid::config::FailureDetection {
                probe_period: Duration::from_millis(500),
                probe_timeout: Duration::from_millis(200),
                suspect_timeout: Duration::from_secs(2),
            })
        );
        assert_eq!(
            defaults.grid_config("a").map(|grid| grid.failure_detection),
            None,
            "a node on its own has no grid settings"
        );
        for (line, name) in [
            ("cluster-probe-period-ms = 10", "cluster-probe-period-ms"),
            ("cluster-probe-timeout-ms = 0", "cluster-probe-timeout-ms"),
            (
                "cluster-suspect-timeout-ms = 50",
                "cluster-suspect-timeout-ms",
            ),
            (
                "cluster-suspect-timeout-ms = 3600000",
                "cluster-suspect-timeout-ms",
            ),
        ] {
            let error = ServerConfig::parse("weft.toml", &format!("[server]\n{line}\n"))
                .err()
                .map(|e| e.to_string());
            assert!(
                error
                    .as_deref()
                    .is_some_and(|e| e.starts_with("weft.toml:2:") && e.contains(name)),
                "{line}: {error:?}"
            );
        }
    }

    // Proves the data directory is `data-dir` when set, `./weft-data` for a node on its own,
    // and a directory per node (its name made safe for a file system) for a clustered one.
    #[test]
    fn the_default_data_directory_is_per_node_in_a_cluster() {
        let single = ServerSection::default();
        assert_eq!(single.data_dir("a"), PathBuf::from("./weft-data"));
        let clustered = ServerConfig::parse("weft.toml", "[server]\njoin = [\"127.0.0.1:7800\"]\n")
            .map(|config| config.server);
        let clustered = clustered.as_ref().ok();
        assert_eq!(
            clustered.map(|s| s.data_dir("a")),
            Some(PathBuf::from("./weft-data/a"))
        );
        for (name, dir) in [
            ("127.0.0.1:11222", "127.0.0.1_11222"),
            ("../up", ".._up"),
            ("..", "__"),
            ("", "_"),
            ("node a/b", "node_a_b"),
        ] {
            assert_eq!(
                clustered.map(|s| s.data_dir(name)),
                Some(Path::new("./weft-data").join(dir)),
                "{name:?}"
            );
        }
        let configured = ServerConfig::parse(
            "weft.toml",
            "[server]\ncluster-listen = \"127.0.0.1:7800\"\ndata-dir = \"/srv/weft\"\n",
        )
        .map(|config| config.server.data_dir("a"));
        assert_eq!(configured.ok(), Some(PathBuf::from("/srv/weft")));
    }

    // Proves errors in either section name the file and line.
    #[test]
    fn errors_name_file_and_line() {
        let text = "[server]\nbind = \"nowhere\"\n";
        let error = ServerConfig::parse("weft.toml", text)
            .err()
            .map(|e| e.to_string());
        assert!(
            error
                .as_deref()
                .is_some_and(|e| e.starts_with("weft.toml:2:") && e.contains("invalid address")),
            "{error:?}"
        );
        let text = "[caches.users]\nsegments = 4\n[caches.users.memory]\nmax-cont = 3\n";
        let error = ServerConfig::parse("weft.toml", text)
            .err()
            .map(|e| e.to_string());
        assert!(
            error
                .as_deref()
                .is_some_and(|e| e.starts_with("weft.toml:4:") && e.contains("unknown field")),
            "{error:?}"
        );
    }
}
