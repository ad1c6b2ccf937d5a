//! `weft.Grid`: a member of a grid in this process (`weft_grid::Grid`), run on the module's
//! runtime; its clustered caches are `weft.Cache` handles whose operations run at each key's
//! owner.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;
use weft_grid::{Grid, GridConfig};

use crate::cache::{Backend, PyCache};
use crate::convert::{block_on, cache_config, manager_config, spawn, timeout as duration};
use crate::error::Error;

/// How long `wait_stable` waits when not told.
const SETTLE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(60);

/// A grid member: its caches, local and clustered, and its part in the cluster.
#[pyclass(frozen, module = "weft", name = "Grid")]
pub(crate) struct PyGrid {
    /// `None` once the member left.
    grid: Mutex<Option<Grid>>,
    name: String,
    address: SocketAddr,
}

impl PyGrid {
    /// Runs `f` on the member, under its lock; call without the GIL (a `leave` or a
    /// `wait_stable` may hold the lock while it waits for the cluster).
    fn with_member<T>(&self, f: impl FnOnce(&Grid) -> Result<T, Error>) -> Result<T, Error> {
        // A panic while the lock was held left the member as it was: still usable.
        let guard = self
            .grid
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match guard.as_ref() {
            Some(grid) => f(grid),
            None => Err(Error::Closed("this grid member has left")),
        }
    }
}

impl Drop for PyGrid {
    /// A member dropped without `leave()` still leaves gracefully, in the background.
    fn drop(&mut self) {
        let taken = self
            .grid
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(grid) = taken {
            spawn(grid.leave());
        }
    }
}

#[pymethods]
impl PyGrid {
    /// Starts member `name` listening at `listen` (`host:port`; port 0 picks a free one)
    /// and joins the members at `join` (their cluster addresses), or starts a cluster of its
    /// own when none answers. `caches` declares the caches as `CacheManager` takes them;
    /// every member declares the same. `secret` is the cluster secret every member shares.
    #[new]
    #[pyo3(signature = (name, listen = "127.0.0.1:0", join = Vec::new(), *, secret = None, caches = None))]
    fn new(
        py: Python<'_>,
        name: String,
        listen: &str,
        join: Vec<String>,
        secret: Option<String>,
        caches: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let listen: SocketAddr = listen.parse().map_err(|error| {
            PyValueError::new_err(format!(
                "listen is an IP address and port (127.0.0.1:7800), not {listen:?}: {error}"
            ))
        })?;
        let caches = manager_config(caches)?;
        let mut config = GridConfig::new(name, listen, join);
        if let Some(secret) = secret {
            config = config.secret(secret);
        }
        let grid =
            py.detach(|| -> Result<Grid, Error> { Ok(block_on(Grid::start(config, caches))??) })?;
        Ok(Self {
            name: grid.name().to_owned(),
            address: grid.address(),
            grid: Mutex::new(Some(grid)),
        })
    }

    /// This member's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The cluster address this member listens at, `host:port` (others join it there).
    #[getter]
    fn address(&self) -> String {
        self.address.to_string()
    }

    /// The members the cluster agreed on, by name, sorted.
    fn members<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let members = py.detach(|| self.with_member(|grid| Ok(grid.members())))?;
        PyList::new(py, members)
    }

    /// Whether every clustered cache has a stable topology over exactly `members` members.
    fn is_stable_with(&self, py: Python<'_>, members: usize) -> PyResult<bool> {
        Ok(py.detach(|| self.with_member(|grid| Ok(grid.is_stable_with(members))))?)
    }

    /// Waits until `is_stable_with(members)`, at most `timeout` (seconds or a `timedelta`,
    /// 60 s by default); `weft.ClusterError` if the cluster did not settle in time.
    #[pyo3(signature = (members, timeout = None))]
    fn wait_stable(
        &self,
        py: Python<'_>,
        members: usize,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let timeout = duration(timeout, "timeout", SETTLE_TIMEOUT_DEFAULT)?;
        py.detach(|| self.with_member(|grid| Ok(block_on(grid.wait_stable(members, timeout))??)))?;
        Ok(())
    }

    /// The cache `name` as this member reaches it (clustered caches: at each key's owner);
    /// `weft.CacheNotFoundError` if this member has none.
    fn cache(&self, py: Python<'_>, name: &str) -> PyResult<PyCache> {
        let cache = py.detach(|| self.with_member(|grid| Ok(grid.cache(name))))?;
        match cache {
            Some(cache) => Ok(PyCache::new(Backend::Grid(cache))),
            None => Err(Error::NotFound(name.to_owned()).into()),
        }
    }

    /// The names of this member's caches, sorted.
    fn cache_names<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let names = py.detach(|| self.with_member(|grid| Ok(grid.manager().cache_names())))?;
        PyList::new(py, names)
    }

    /// Defines cache `name` on every member (members that join later create it too) and
    /// returns it once this member has it. `config` as `CacheManager.create_cache` takes it;
    /// `mode = "distributed"` or `"replicated"` makes it clustered.
    #[pyo3(signature = (name, config = None))]
    fn define_cache(
        &self,
        py: Python<'_>,
        name: &str,
        config: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyCache> {
        let config = cache_config(config)?;
        let cache =
            py.detach(|| self.with_member(|grid| Ok(block_on(grid.define_cache(name, config))??)))?;
        Ok(PyCache::new(Backend::Grid(cache)))
    }

    /// Leaves the cluster gracefully: the other members take over this member's segments,
    /// then it stops. Calling it again does nothing.
    fn leave(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| -> Result<(), Error> {
            let taken = self
                .grid
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            if let Some(grid) = taken {
                block_on(grid.leave())?;
            }
            Ok(())
        })?;
        Ok(())
    }

    /// Whether this member has left.
    #[getter]
    fn left(&self, py: Python<'_>) -> bool {
        py.detach(|| {
            self.grid
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .is_none()
        })
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
        self.leave(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("<weft.Grid '{}' at {}>", self.name, self.address)
    }
}
