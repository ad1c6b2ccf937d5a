//! `weft.RemoteCacheManager`: the Hot Rod client (`weft_client::Client`) on the module's
//! runtime, with Python's blocking calls.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use weft_client::{Client, ClientConfig, Intelligence, NearCacheConfig};

use crate::cache::{Backend, PyCache};
use crate::convert::{block_on, timeout};
use crate::error::Error;

/// A client of Weft (or Infinispan) servers over Hot Rod.
#[pyclass(frozen, module = "weft", name = "RemoteCacheManager")]
pub(crate) struct PyRemoteCacheManager {
    client: Client,
}

fn intelligence(name: &str) -> PyResult<Intelligence> {
    match name {
        "basic" => Ok(Intelligence::Basic),
        "topology" => Ok(Intelligence::TopologyAware),
        "hash" => Ok(Intelligence::HashDistributionAware),
        other => Err(PyValueError::new_err(format!(
            "intelligence is \"basic\", \"topology\" or \"hash\", not {other:?}"
        ))),
    }
}

/// Resolves `host:port` names (blocking: call without the GIL).
fn resolve(servers: &[String]) -> PyResult<Vec<SocketAddr>> {
    let mut addresses = Vec::new();
    for server in servers {
        let resolved = server.to_socket_addrs().map_err(|error| {
            PyValueError::new_err(format!(
                "server {server:?} is not a reachable host:port: {error}"
            ))
        })?;
        addresses.extend(resolved);
    }
    if addresses.is_empty() {
        return Err(PyValueError::new_err("name at least one server"));
    }
    Ok(addresses)
}

#[pymethods]
impl PyRemoteCacheManager {
    /// Connects to the first of `servers` (`host:port`) that answers; with hash-aware
    /// routing (the default) the cluster's topology replaces the list. Timeouts are seconds
    /// or `timedelta`s. `near_cache_entries` turns on a near cache of that many entries per
    /// cache, whose values are never older than `near_cache_staleness` (seconds).
    #[new]
    #[pyo3(signature = (
        servers = vec!["127.0.0.1:11222".to_owned()],
        *,
        connect_timeout = None,
        request_timeout = None,
        retries = 3,
        intelligence = "hash",
        protocol_version = None,
        near_cache_entries = None,
        near_cache_staleness = None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        servers: Vec<String>,
        connect_timeout: Option<&Bound<'_, PyAny>>,
        request_timeout: Option<&Bound<'_, PyAny>>,
        retries: u32,
        intelligence: &str,
        protocol_version: Option<u8>,
        near_cache_entries: Option<usize>,
        near_cache_staleness: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let connect = timeout(connect_timeout, "connect_timeout", Duration::from_secs(5))?;
        let request = timeout(request_timeout, "request_timeout", Duration::from_secs(10))?;
        let intelligence = self::intelligence(intelligence)?;
        let staleness = timeout(
            near_cache_staleness,
            "near_cache_staleness",
            Duration::from_secs(1),
        )?;
        let addresses = py.detach(|| resolve(&servers))?;
        let mut config = ClientConfig::new(addresses)
            .with_timeouts(connect, request)
            .with_intelligence(intelligence);
        config.retries_max = retries;
        if let Some(version) = protocol_version {
            config = config.with_protocol_version(version);
        }
        if let Some(entries) = near_cache_entries {
            config = config.with_near_cache(NearCacheConfig::new(entries, staleness));
        }
        let client =
            py.detach(|| -> Result<Client, Error> { Ok(block_on(Client::connect(config))??) })?;
        Ok(Self { client })
    }

    /// The server's cache `name`; `weft.CacheNotFoundError` if it has none.
    fn cache(&self, py: Python<'_>, name: &str) -> PyResult<PyCache> {
        let cache =
            py.detach(|| -> Result<_, Error> { Ok(block_on(self.client.cache(name))??) })?;
        Ok(PyCache::new(Backend::Remote(cache)))
    }

    /// Closes every connection. Caches opened from this manager reconnect if used again.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        // Inside the runtime: closing touches the connections' tasks and sockets.
        py.detach(|| block_on(async { self.client.close() }))?;
        Ok(())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _kind: &Bound<'_, PyAny>,
        _value: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "<weft.RemoteCacheManager servers={:?}>",
            self.client.config().servers
        )
    }
}
