//! The container (Infinispan's cache manager), its health and statistics, and the server:
//! `/rest/v2/container…`, the deprecated `/rest/v2/cache-managers/default…` aliases, and
//! `/rest/v2/server`. Health follows the cluster: a cache rebalancing or DEGRADED, a member
//! failure detection no longer sees.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::RestError;
use crate::{CLUSTER_NAME, CONTAINER_NAME, ClientAddress, QueryParams, Shared, json, query_params};

/// Infinispan's health status of a cache or cluster that is fully available.
const HEALTHY: &str = "HEALTHY";
/// A cache whose segments are moving between members (one joined, left or died).
const HEALTHY_REBALANCING: &str = "HEALTHY_REBALANCING";
/// A cache cut off from the majority (partition handling), or a cluster missing a member
/// failure detection no longer sees.
const DEGRADED: &str = "DEGRADED";

/// Each cache's health, and the cluster's (the worst of its caches', or DEGRADED while an
/// agreed member is unreachable), as Infinispan reports them.
fn healths(state: &Shared) -> (Vec<(String, &'static str)>, &'static str) {
    let cluster = state.cluster_members();
    let caches: Vec<(String, &'static str)> = state
        .manager()
        .cache_names()
        .into_iter()
        .map(|name| {
            let status = match cluster.caches.iter().find(|view| view.cache == name) {
                Some(view) if view.degraded => DEGRADED,
                Some(view) if view.phase != "stable" => HEALTHY_REBALANCING,
                _ => HEALTHY,
            };
            (name, status)
        })
        .collect();
    let rank = |status: &str| match status {
        DEGRADED => 2,
        HEALTHY_REBALANCING => 1,
        _ => 0,
    };
    let mut overall = caches
        .iter()
        .map(|(_, status)| *status)
        .max_by_key(|status| rank(status))
        .unwrap_or(HEALTHY);
    if !cluster.unreachable.is_empty() {
        overall = DEGRADED;
    }
    (caches, overall)
}
/// `GET /rest/v2/container`: what the container holds and where it runs.
pub(crate) async fn info(State(state): State<Shared>) -> Response {
    let names = state.manager().cache_names();
    let defined: Vec<Value> = names
        .iter()
        .map(|name| json!({ "name": name, "started": true }))
        .collect();
    let cluster = state.cluster_members();
    // While no leader is known (an election), the first member by name stands in.
    let coordinator = cluster
        .coordinator
        .clone()
        .or_else(|| cluster.names.first().cloned())
        .unwrap_or_else(|| state.node_name().to_owned());
    json::respond(&json!({
        "version": state.server_version(),
        "name": CONTAINER_NAME,
        "node_name": state.node_name(),
        "coordinator": coordinator == state.node_name(),
        "cache_manager_status": "RUNNING",
        "created_cache_count": names.len(),
        "running_cache_count": names.len(),
        "cluster_name": CLUSTER_NAME,
        "cluster_size": cluster.names.len(),
        "cluster_members": cluster.names,
        "cluster_members_physical_addresses": cluster.addresses,
        "coordinator_address": coordinator,
        "health": healths(&state).1,
        "defined_caches": defined,
        "cache_configuration_names": [],
        "rebalancing_enabled": false,
        "uptime_seconds": state.started().elapsed().as_secs(),
    }))
}

/// `GET|HEAD /rest/v2/container/health`.
pub(crate) async fn health(State(state): State<Shared>) -> Response {
    let (caches, overall) = healths(&state);
    let caches: Vec<Value> = caches
        .into_iter()
        .map(|(name, status)| json!({ "status": status, "cache_name": name }))
        .collect();
    let cluster = state.cluster_members();
    json::respond(&json!({
        "cluster_health": {
            "cluster_name": CLUSTER_NAME,
            "health_status": overall,
            "number_of_nodes": cluster.names.len(),
            "node_names": cluster.names,
            "unreachable_nodes": cluster.unreachable,
        },
        "cache_health": caches,
    }))
}

/// `GET /rest/v2/container/health/status`: the bare word, for load balancers and probes.
pub(crate) async fn health_status(State(state): State<Shared>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        healths(&state).1,
    )
        .into_response()
}

/// `GET /rest/v2/container/health/ready`: `200 READY` once the server serves every cache it
/// should, `503 STARTING` before (it has not joined its cluster, or still fetches what it
/// owns) and `503 DRAINING` while it stops — what a Kubernetes readiness probe or a load
/// balancer reads. Weft's own: Infinispan has no readiness endpoint.
pub(crate) async fn health_ready(State(state): State<Shared>) -> Response {
    let readiness = state.readiness();
    let status = if readiness == crate::Readiness::Ready {
        axum::http::StatusCode::OK
    } else {
        axum::http::StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        readiness.word(),
    )
        .into_response()
}

/// `GET /rest/v2/container/stats`: statistics summed over every cache.
pub(crate) async fn stats(State(state): State<Shared>) -> Response {
    json::respond(&json::statistics(&state.manager().statistics()))
}

/// `GET /rest/v2/server`: the version.
pub(crate) async fn server(State(state): State<Shared>) -> Response {
    json::respond(&json!({ "version": state.server_version() }))
}

/// The `action` parameter, or a 400.
fn action_name(query: QueryParams) -> Result<String, RestError> {
    query_params(query)?
        .get("action")
        .cloned()
        .ok_or_else(|| RestError::bad_request("missing action"))
}

fn unknown_action(action: &str) -> RestError {
    RestError::bad_request(format!("unknown action `{action}`"))
}

/// Who sent a lifecycle action: what the server that accepted the request knows of it.
pub(crate) struct Caller {
    client: Option<ClientAddress>,
    authenticated: Option<crate::Authenticated>,
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(Self {
            client: parts.extensions.get::<ClientAddress>().copied(),
            authenticated: parts.extensions.get::<crate::Authenticated>().cloned(),
        })
    }
}

impl Caller {
    /// Whether the request came straight from a client on this machine: from `127.0.0.1` or
    /// `::1`. Other `127.x.y.z` addresses do not count, so the narrowest reading of
    /// "loopback" decides (and tests can play a remote client from `127.0.0.2`). A request
    /// without a client address (one an embedding program built) does not count.
    fn is_loopback(&self) -> bool {
        self.client
            .is_some_and(|ClientAddress(peer)| crate::is_local_client(peer))
    }
}

/// Lets a server lifecycle action through when its request authenticated (the [`Guard`]
/// then decided the user may: a server that asks for credentials asks for them here too,
/// from loopback as from elsewhere) or, on a server that asks for none, when it comes from
/// loopback: anyone who can reach the port could otherwise stop the server. 403 otherwise.
///
/// [`Guard`]: crate::Guard
fn authorize_lifecycle(caller: &Caller) -> Result<(), RestError> {
    if caller.authenticated.is_some() || caller.is_loopback() {
        return Ok(());
    }
    Err(RestError::new(
        StatusCode::FORBIDDEN,
        "server lifecycle actions are accepted from loopback only, on a server that asks no credentials",
    ))
}

/// Calls the shutdown hook: 204, or 501 when the embedding server gave none.
fn stop(state: &Shared) -> Result<Response, RestError> {
    let hook = state.shutdown.as_ref().ok_or_else(|| {
        RestError::new(
            StatusCode::NOT_IMPLEMENTED,
            "this server cannot be stopped over REST",
        )
    })?;
    tracing::info!("stop requested over REST");
    hook();
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /rest/v2/container?action=shutdown`: stops the server (a single-node container
/// is the server).
pub(crate) async fn action(
    State(state): State<Shared>,
    caller: Caller,
    query: QueryParams,
) -> Result<Response, RestError> {
    match action_name(query)?.as_str() {
        "shutdown" => {
            authorize_lifecycle(&caller)?;
            stop(&state)
        }
        other => Err(unknown_action(other)),
    }
}

/// `POST /rest/v2/server?action=stop`.
pub(crate) async fn server_action(
    State(state): State<Shared>,
    caller: Caller,
    query: QueryParams,
) -> Result<Response, RestError> {
    match action_name(query)?.as_str() {
        "stop" => {
            authorize_lifecycle(&caller)?;
            stop(&state)
        }
        other => Err(unknown_action(other)),
    }
}

/// `GET /rest/v2/cluster/topology`: the members, the coordinator and every clustered
/// cache's topology as this node installed it: segment owners, rebalance phase,
/// state-transfer progress.
pub(crate) async fn topology(State(state): State<Shared>) -> Response {
    let cluster = state.cluster_members();
    let members: Vec<Value> = cluster
        .names
        .iter()
        .zip(
            cluster
                .addresses
                .iter()
                .map(Some)
                .chain(std::iter::repeat(None)),
        )
        .map(|(name, address)| json!({ "name": name, "address": address }))
        .collect();
    json::respond(&json!({
        "node_name": state.node_name(),
        "coordinator": cluster.coordinator,
        "members": members,
        "caches": cluster.caches,
    }))
}
