//! The container (Infinispan's cache manager), its health and statistics, and the server:
//! `/rest/v2/container…`, the deprecated `/rest/v2/cache-managers/default…` aliases, and
//! `/rest/v2/server`. A single-node build is always one healthy node.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::RestError;
use crate::{CLUSTER_NAME, CONTAINER_NAME, QueryParams, Shared, json, query_params};

/// Infinispan's health status of a cache or cluster that is fully available.
const HEALTHY: &str = "HEALTHY";

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
        "health": HEALTHY,
        "defined_caches": defined,
        "cache_configuration_names": [],
        "rebalancing_enabled": false,
        "uptime_seconds": state.started().elapsed().as_secs(),
    }))
}

/// `GET|HEAD /rest/v2/container/health`.
pub(crate) async fn health(State(state): State<Shared>) -> Response {
    let caches: Vec<Value> = state
        .manager()
        .cache_names()
        .into_iter()
        .map(|name| json!({ "status": HEALTHY, "cache_name": name }))
        .collect();
    let cluster = state.cluster_members();
    json::respond(&json!({
        "cluster_health": {
            "cluster_name": CLUSTER_NAME,
            "health_status": HEALTHY,
            "number_of_nodes": cluster.names.len(),
            "node_names": cluster.names,
        },
        "cache_health": caches,
    }))
}

/// `GET /rest/v2/container/health/status`: the bare word, for load balancers and probes.
pub(crate) async fn health_status() -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        HEALTHY,
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
    query: QueryParams,
) -> Result<Response, RestError> {
    match action_name(query)?.as_str() {
        "shutdown" => stop(&state),
        other => Err(unknown_action(other)),
    }
}

/// `POST /rest/v2/server?action=stop`.
pub(crate) async fn server_action(
    State(state): State<Shared>,
    query: QueryParams,
) -> Result<Response, RestError> {
    match action_name(query)?.as_str() {
        "stop" => stop(&state),
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
