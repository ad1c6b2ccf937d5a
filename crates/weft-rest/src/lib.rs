//! `weft-rest` is Weft's HTTP face: Infinispan's REST API v2 (entries, caches, container,
//! health, server) and a Prometheus `/metrics` endpoint, as one axum [`Router`] over a
//! [`weft_core::CacheManager`]. `docs/rest.md` lists every route, status and header.
//!
//! It owns the HTTP dialect: how paths, headers and bodies map to Cache API calls, and how
//! results and errors map back to Infinispan's status codes, headers and JSON shapes.
//!
//! It must not do I/O of its own: no sockets, no listeners, no TLS, no spawning of servers.
//! `weft-server` detects HTTP on its port and serves [`router`] on each connection. Nor does
//! it reach into the data container: every route is a thin adapter over the public
//! [`weft_core::Cache`] API, so anything it does, an embedded user could do too.
//!
//! Choices that differ from, or are not defined by, Infinispan:
//! * Keys are raw bytes. Without `Key-Content-Type` (or with `text/plain` or
//!   `application/x-java-object; type=java.lang.String`) the percent-decoded URL segment is
//!   the key; `application/octet-stream` takes it as Base64, and
//!   `application/octet-stream; encoding=hex` as `0x…` hex.
//! * Values are stored as sent and returned as stored; `Accept` only picks the
//!   `Content-Type` label (`text/plain`, `application/json`, else `application/octet-stream`).
//! * In JSON listings (`?action=keys`, `?action=entries`) keys and values are UTF-8 text,
//!   with invalid sequences replaced by U+FFFD (lossy), unless the request names a binary
//!   `Key-Content-Type`: then keys and values are Base64 (or `0x…` hex) strings, exactly
//!   as the same header addresses keys in URLs, so listings round-trip.
//! * ETags are the entry version in quotes; conditional writes are atomic (evaluated under
//!   the key's lock by [`weft_core::Cache::compute`]).
//! * A full cache (`when-full = "exception"`) answers 507 Insufficient Storage, where
//!   Infinispan answers 500; both are server errors, 507 says why.

mod auth;
mod caches;
mod console;
mod container;
mod entries;
mod error;
mod headers;
mod json;
mod keys;
mod metrics;
mod rebalance;

pub use entries::register_functions;
pub use metrics::MetricsWriter;

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::get;
use weft_core::CacheManager;

/// Largest request body accepted on the entry routes: the largest value the core accepts.
/// axum's default of 2 MiB would refuse values the other protocols store.
pub const ENTRY_BODY_BYTES_MAX: usize = weft_core::cache::VALUE_BYTES_MAX;
/// Largest request body accepted anywhere else (cache configurations, actions). Real
/// configurations are a few hundred bytes; this bounds what a client can make us buffer.
pub const CONFIG_BODY_BYTES_MAX: usize = 1 << 20;
/// The cluster name reported by health and container routes (a single-node build).
pub const CLUSTER_NAME: &str = "weft";
/// The container (cache manager) name; Infinispan's default container is `default` too.
pub const CONTAINER_NAME: &str = "default";

/// Called by `POST /rest/v2/server?action=stop` and `POST /rest/v2/container?action=shutdown`
/// to ask the server to stop. It must return quickly (signal, don't wait) and may be called
/// more than once. Those actions are refused unless the request comes from a loopback
/// [`ClientAddress`] or is authenticated (a [`Guard`] decides who may).
pub type ShutdownHook = Arc<dyn Fn() + Send + Sync>;

/// Whether this server takes client traffic now, as `GET /rest/v2/container/health/ready`
/// reports it to a readiness probe or a load balancer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// It serves every cache it should.
    Ready,
    /// It is starting: it has not joined its cluster, or is still fetching what it owns.
    Starting,
    /// It is stopping: it takes no new connection and is handing its data over.
    Draining,
}

impl Readiness {
    /// The word the endpoint answers.
    #[must_use]
    pub fn word(self) -> &'static str {
        match self {
            Self::Ready => "READY",
            Self::Starting => "STARTING",
            Self::Draining => "DRAINING",
        }
    }
}

/// Tells the readiness endpoint whether the server is ready; see [`Readiness`].
pub type ReadinessProbe = Arc<dyn Fn() -> Readiness + Send + Sync>;

/// Decides whether a request may go on: checks its HTTP Basic credentials and whether their
/// user may do what the request asks. May take a while (a slow hash); see
/// [`RestState::with_guard`].
pub type Guard = Arc<dyn Fn(Access<'_>) -> Verdict + Send + Sync>;

/// What a [`Guard`] is shown of a request.
#[derive(Debug, Clone, Copy)]
pub struct Access<'a> {
    /// The client's address, when known.
    pub client: Option<std::net::SocketAddr>,
    /// The user name and password of its `Authorization: Basic` header, if it has one.
    pub credentials: Option<(&'a [u8], &'a [u8])>,
    /// The token of its `Authorization: Bearer` header, if it has one.
    pub bearer: Option<&'a str>,
    /// The user its connection's client certificate names ([`ClientCertificate`]), if any.
    pub certificate: Option<&'a str>,
    /// The method.
    pub method: &'a axum::http::Method,
    /// The path, still percent-encoded.
    pub path: &'a str,
    /// The `action` query parameter, if any.
    pub action: Option<&'a str>,
    /// When the guard was first shown this request: a request its guard answered
    /// [`Verdict::Wait`] is shown again, with the same instant.
    pub first_attempt: std::time::Instant,
}

/// A [`Guard`]'s decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Go on: as this user (`None`: anonymously, where the guard allows it).
    Allowed(Option<String>),
    /// `401` with a challenge: no credentials, or wrong ones (the reason says which); the
    /// challenge names the schemes the server accepts.
    Unauthenticated(&'static str, Challenge),
    /// `403`: the user may not (the message says what it lacks).
    Forbidden(String),
    /// Not decided yet: show the request to the guard again at this instant (its
    /// credentials wait for their turn; the request waits meanwhile).
    Wait(std::time::Instant),
    /// `429` with `Retry-After`: the credentials were not checked, the guard throttles them
    /// (the message says so).
    Throttled(String, std::time::Duration),
}

/// What a `401` asks for (`WWW-Authenticate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Challenge {
    /// HTTP Basic credentials.
    Basic,
    /// HTTP Basic credentials or a bearer token.
    BasicOrBearer,
    /// A valid bearer token (the one sent was refused: RFC 6750's `invalid_token`).
    InvalidBearer,
}

impl Challenge {
    /// The `WWW-Authenticate` value.
    #[must_use]
    pub fn header(self) -> &'static str {
        match self {
            Self::Basic => auth::CHALLENGE,
            Self::BasicOrBearer => auth::CHALLENGE_WITH_BEARER,
            Self::InvalidBearer => auth::INVALID_BEARER,
        }
    }
}

/// A request extension naming the user the request authenticated as (set by the router's
/// authentication when a [`Guard`] is configured).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated(pub String);

/// What the routes need: the caches, and the facts about this server they report.
///
/// Build it with [`RestState::new`] and the `with_*` methods, then pass it to [`router`]:
///
/// ```
/// use weft_core::{CacheManager, ManagerConfig};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let manager = CacheManager::new(ManagerConfig::default())?;
/// let (stop, _stopped) = tokio::sync::watch::channel(false);
/// let state = weft_rest::RestState::new(manager)
///     .with_server_version("Weft 0.1.0")
///     .with_node_name("node-a")
///     .with_shutdown(move || {
///         stop.send_replace(true);
///     });
/// let _app: axum::Router = weft_rest::router(state);
/// # Ok(()) }
/// ```
pub struct RestState {
    manager: CacheManager,
    server_version: String,
    node_name: String,
    started: Instant,
    shutdown: Option<ShutdownHook>,
    readiness: Option<ReadinessProbe>,
    cluster: Option<ClusterView>,
    forwarder: Option<Arc<dyn Forwarder>>,
    guard: Option<Guard>,
    server_metrics: Option<ServerMetrics>,
}

/// A request extension naming the address of the client connection a request arrived on,
/// inserted by the server that accepted it. A request without one (forwarded by another node,
/// or built by an embedding program) counts as coming from elsewhere than loopback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddress(pub std::net::SocketAddr);

/// A request extension naming the user the connection's verified TLS client certificate
/// names, inserted by the server that accepted it: what a request without other credentials
/// authenticates as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCertificate(pub String);

/// What a clustered server does for REST's requests on clustered caches (see
/// [`RestState::with_forwarder`]): keyed operations at their keys' owners, and the
/// cache-wide ones across the cluster.
pub trait Forwarder: Send + Sync + 'static {
    /// Runs `operation` on the clustered `cache` at its key's owner (this member or
    /// another), acknowledged once replicated and durable as the cache promises.
    fn execute(
        &self,
        cache: weft_core::Cache,
        operation: weft_core::operation::Operation,
    ) -> weft_core::persistence::BoxFuture<
        Result<weft_core::operation::Applied, weft_core::CacheError>,
    >;

    /// Entries of a clustered cache across the cluster, each counted once.
    fn size(
        &self,
        cache: weft_core::Cache,
    ) -> weft_core::persistence::BoxFuture<Result<u64, String>>;

    /// Up to `limit` entries of a clustered cache from the whole cluster, each once, that
    /// `keep` accepts.
    fn list(
        &self,
        cache: weft_core::Cache,
        limit: usize,
        keep: fn(&weft_core::CacheEntry) -> bool,
    ) -> weft_core::persistence::BoxFuture<Result<Vec<weft_core::CacheEntry>, String>>;

    /// Clears a clustered cache on every node.
    fn clear(
        &self,
        cache: weft_core::Cache,
    ) -> weft_core::persistence::BoxFuture<Result<(), String>>;

    /// Defines a clustered cache on every node; done once this node has it.
    fn define(
        &self,
        name: String,
        config: weft_core::CacheConfig,
    ) -> weft_core::persistence::BoxFuture<Result<(), String>>;

    /// Removes a clustered cache from every node; done once this node no longer has it.
    /// False when there was no such cache.
    fn remove(&self, name: String) -> weft_core::persistence::BoxFuture<Result<bool, String>>;
}

/// Who is in the cluster, as this node sees it: names and cluster addresses, this node
/// included, sorted by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterMembers {
    /// Node names.
    pub names: Vec<String>,
    /// Their cluster addresses, in the same order.
    pub addresses: Vec<String>,
    /// The member that coordinates the cluster (the consensus leader), when known.
    pub coordinator: Option<String>,
    /// The clustered caches' topologies as this node installed them.
    pub caches: Vec<CacheTopologyView>,
    /// Requests this node sent on to the owner of their keys, per protocol.
    pub forwarded: Vec<(&'static str, u64)>,
    /// Agreed members failure detection does not see alive now.
    pub unreachable: Vec<String>,
    /// Bytes sent and received over cluster connections.
    pub bytes: (u64, u64),
}

/// A clustered cache's topology, for REST and `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CacheTopologyView {
    /// The cache.
    pub cache: String,
    /// Agreed topology id (increases with every change).
    pub topology_id: u32,
    /// The rebalance it belongs to.
    pub rebalance_id: u32,
    /// `stable`, or the phase of the rebalance under way.
    pub phase: String,
    /// Members of the topology.
    pub members: Vec<String>,
    /// Each segment's owners, the one that orders its writes first.
    pub owners: Vec<Vec<String>>,
    /// Segments this node is the primary of.
    pub primary_segments: u64,
    /// Segments this node holds a copy of.
    pub owned_segments: u64,
    /// State transfer of the current rebalance on this node.
    pub transfer: TransferView,
    /// Whether the cache refuses operations after losing too many members.
    pub degraded: bool,
    /// The agreed rebalance under way, member by member (empty when stable).
    pub rebalance: Vec<MemberRebalanceView>,
}

/// One member's part in a rebalance, as the cluster agreed it: what it must fetch, and
/// whether it confirmed the current phase (in the first phase, that its transfers are done).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct MemberRebalanceView {
    /// The member's name.
    pub member: String,
    /// Segments it copies from others in this rebalance.
    pub segments_to_fetch: u64,
    /// Whether it confirmed the current phase.
    pub confirmed: bool,
}

/// State-transfer progress on one node.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct TransferView {
    /// Segments to fetch.
    pub segments_total: u64,
    /// Segments fetched.
    pub segments_done: u64,
    /// Entries received.
    pub entries: u64,
}

/// Reads the current cluster membership (the server's membership service).
pub type ClusterView = Arc<dyn Fn() -> ClusterMembers + Send + Sync>;

/// Writes the families the embedding server adds to `/metrics` (its process, connections,
/// request latencies): what the router cannot see.
pub type ServerMetrics = Arc<dyn Fn(&mut MetricsWriter<'_>) + Send + Sync>;

impl fmt::Debug for RestState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RestState")
            .field("manager", &self.manager)
            .field("server_version", &self.server_version)
            .field("node_name", &self.node_name)
            .field("started", &self.started)
            .field("shutdown", &self.shutdown.is_some())
            .field("cluster", &self.cluster.is_some())
            .finish()
    }
}

impl RestState {
    /// State over `manager`, reporting version `Weft <crate version>`, node name `weft`,
    /// started now, with no shutdown hook (stop actions then answer 501).
    #[must_use]
    pub fn new(manager: CacheManager) -> Self {
        Self {
            manager,
            server_version: format!("Weft {}", env!("CARGO_PKG_VERSION")),
            node_name: CLUSTER_NAME.to_owned(),
            started: Instant::now(),
            shutdown: None,
            readiness: None,
            cluster: None,
            forwarder: None,
            guard: None,
            server_metrics: None,
        }
    }

    /// Families `/metrics` gets from the server, after the caches' and the cluster's.
    #[must_use]
    pub fn with_server_metrics(
        mut self,
        write: impl Fn(&mut MetricsWriter<'_>) + Send + Sync + 'static,
    ) -> Self {
        self.server_metrics = Some(Arc::new(write));
        self
    }

    /// The server's families, if it adds any.
    pub(crate) fn server_metrics(&self) -> Option<&ServerMetrics> {
        self.server_metrics.as_ref()
    }

    /// Where the container and health reports read the cluster's members; without one the
    /// node is alone.
    #[must_use]
    pub fn with_cluster_view(
        mut self,
        view: impl Fn() -> ClusterMembers + Send + Sync + 'static,
    ) -> Self {
        self.cluster = Some(Arc::new(view));
        self
    }

    /// Forwards entry requests for keys another node owns.
    #[must_use]
    pub fn with_forwarder(mut self, forwarder: Arc<dyn Forwarder>) -> Self {
        self.forwarder = Some(forwarder);
        self
    }

    /// The forwarder, when clustered.
    pub(crate) fn forwarder(&self) -> Option<&Arc<dyn Forwarder>> {
        self.forwarder.as_ref()
    }

    /// The cluster's members as this node sees them (just this node when not clustered).
    #[must_use]
    pub fn cluster_members(&self) -> ClusterMembers {
        match &self.cluster {
            Some(view) => view(),
            None => ClusterMembers {
                names: vec![self.node_name.clone()],
                addresses: Vec::new(),
                coordinator: Some(self.node_name.clone()),
                ..ClusterMembers::default()
            },
        }
    }

    /// The version string `GET /rest/v2/server` and the container report.
    #[must_use]
    pub fn with_server_version(mut self, version: impl Into<String>) -> Self {
        self.server_version = version.into();
        self
    }

    /// This node's name in health and container reports.
    #[must_use]
    pub fn with_node_name(mut self, node_name: impl Into<String>) -> Self {
        self.node_name = node_name.into();
        self
    }

    /// When the server started (for uptime in `/metrics` and the container report).
    #[must_use]
    pub fn with_started(mut self, started: Instant) -> Self {
        self.started = started;
        self
    }

    /// What stop and shutdown actions call; see [`ShutdownHook`].
    #[must_use]
    pub fn with_shutdown(mut self, hook: impl Fn() + Send + Sync + 'static) -> Self {
        self.shutdown = Some(Arc::new(hook));
        self
    }

    /// What `GET /rest/v2/container/health/ready` reports; without one, always ready.
    #[must_use]
    pub fn with_readiness(mut self, probe: impl Fn() -> Readiness + Send + Sync + 'static) -> Self {
        self.readiness = Some(Arc::new(probe));
        self
    }

    /// Whether the server is ready for client traffic.
    #[must_use]
    pub fn readiness(&self) -> Readiness {
        self.readiness
            .as_ref()
            .map_or(Readiness::Ready, |probe| probe())
    }

    /// Lets every request (but the health status probes read) through only as `guard`
    /// decides: `401` with a challenge for missing or wrong credentials, `403` for a user
    /// without the permission.
    #[must_use]
    pub fn with_guard(mut self, guard: Guard) -> Self {
        self.guard = Some(guard);
        self
    }

    /// The caches served.
    #[must_use]
    pub fn manager(&self) -> &CacheManager {
        &self.manager
    }

    /// The version string reported.
    #[must_use]
    pub fn server_version(&self) -> &str {
        &self.server_version
    }

    /// This node's name.
    #[must_use]
    pub fn node_name(&self) -> &str {
        &self.node_name
    }

    /// When the server started.
    #[must_use]
    pub fn started(&self) -> Instant {
        self.started
    }
}

/// Whether `peer` is a client on this machine for the lifecycle actions' rule: `127.0.0.1`
/// or `::1` only (other `127.x.y.z` addresses do not count). RESP's SHUTDOWN follows the
/// same rule.
#[must_use]
pub fn is_local_client(peer: std::net::SocketAddr) -> bool {
    match peer.ip().to_canonical() {
        std::net::IpAddr::V4(ip) => ip == std::net::Ipv4Addr::LOCALHOST,
        std::net::IpAddr::V6(ip) => ip == std::net::Ipv6Addr::LOCALHOST,
    }
}

/// The state every handler receives.
pub(crate) type Shared = Arc<RestState>;

/// A route's query string, extracted without failing the request so that a malformed one
/// becomes our own 400 (see [`query_params`]).
pub(crate) type QueryParams = Result<
    axum::extract::Query<std::collections::HashMap<String, String>>,
    axum::extract::rejection::QueryRejection,
>;

/// The query parameters, or a 400 naming what is wrong with them.
pub(crate) fn query_params(
    query: QueryParams,
) -> Result<std::collections::HashMap<String, String>, error::RestError> {
    query
        .map(|axum::extract::Query(params)| params)
        .map_err(|rejection| error::RestError::bad_request(rejection.body_text()))
}

/// All REST v2 routes and `/metrics`, ready to serve. Unknown paths answer 404 and known
/// paths with an unsupported method 405 (with `Allow`), both with a text body.
pub fn router(state: RestState) -> Router {
    let state = Arc::new(state);
    let container = || {
        get(container::info)
            .post(container::action)
            .layer(DefaultBodyLimit::max(CONFIG_BODY_BYTES_MAX))
    };
    Router::new()
        .route("/rest/v2/caches", get(caches::list))
        .route(
            "/rest/v2/caches/{cache}",
            get(caches::get)
                .head(caches::head)
                .post(caches::post)
                .put(caches::put)
                .delete(caches::delete)
                .layer(DefaultBodyLimit::max(CONFIG_BODY_BYTES_MAX)),
        )
        .route(
            "/rest/v2/caches/{cache}/{key}",
            get(entries::get)
                .put(entries::put)
                .post(entries::post)
                .delete(entries::delete)
                .layer(DefaultBodyLimit::max(ENTRY_BODY_BYTES_MAX)),
        )
        .route("/rest/v2/container", container())
        .route("/rest/v2/container/health", get(container::health))
        .route(
            "/rest/v2/container/health/status",
            get(container::health_status),
        )
        .route(
            "/rest/v2/container/health/ready",
            get(container::health_ready),
        )
        .route("/rest/v2/container/stats", get(container::stats))
        // Infinispan 15 renamed `cache-managers/{name}` to `container`; old clients and
        // scripts still use the deprecated paths.
        .route("/rest/v2/cache-managers/default", container())
        .route(
            "/rest/v2/cache-managers/default/health",
            get(container::health),
        )
        .route(
            "/rest/v2/cache-managers/default/health/status",
            get(container::health_status),
        )
        .route(
            "/rest/v2/cache-managers/default/stats",
            get(container::stats),
        )
        .route(
            "/rest/v2/server",
            get(container::server)
                .post(container::server_action)
                .layer(DefaultBodyLimit::max(CONFIG_BODY_BYTES_MAX)),
        )
        .route("/metrics", get(metrics::metrics))
        .route("/console", get(console::redirect))
        .route(console::ROOT, get(console::index))
        .route("/console/{file}", get(console::file))
        .route("/rest/v2/cluster/topology", get(container::topology))
        .route("/rest/v2/cluster/rebalance", get(rebalance::rebalance))
        .fallback(error::no_route)
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            auth::require,
        ))
        .with_state(state)
}
