//! `weft.CacheManager`: local caches in this process (`weft_core::CacheManager`), with the
//! expiration reaper running.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::cache::{Backend, PyCache, statistics_dict};
use crate::convert::{cache_config, manager_config};
use crate::error::{Error, WeftError};

/// Named caches held in this process.
#[pyclass(frozen, module = "weft", name = "CacheManager")]
pub(crate) struct PyCacheManager {
    manager: weft_core::CacheManager,
}

#[pymethods]
impl PyCacheManager {
    /// A manager with the caches `config` declares: `None` for one local cache named
    /// `default`, else the `[caches.NAME]` tables of a `weft.toml` as TOML text, or the same
    /// as a mapping (`{"caches": {"orders": {"memory": {"max-count": 1000}}}}`).
    #[new]
    #[pyo3(signature = (config = None))]
    fn new(py: Python<'_>, config: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let config = manager_config(config)?;
        let manager = py.detach(|| weft_core::CacheManager::new(config).map_err(Error::from))?;
        manager
            .start_reaper()
            .map_err(|error| WeftError::new_err(format!("start the expiration reaper: {error}")))?;
        Ok(Self { manager })
    }

    /// The cache `name`; `weft.CacheNotFoundError` if there is none.
    fn cache(&self, name: &str) -> PyResult<PyCache> {
        match self.manager.cache(name) {
            Some(cache) => Ok(PyCache::new(Backend::Local(cache))),
            None => Err(Error::NotFound(name.to_owned()).into()),
        }
    }

    /// The names of the caches, sorted.
    fn cache_names<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.manager.cache_names())
    }

    /// Creates cache `name` from `config` (`None`: a local cache with the defaults; TOML
    /// text or a mapping of a `[caches.NAME]` table's settings).
    #[pyo3(signature = (name, config = None))]
    fn create_cache(
        &self,
        py: Python<'_>,
        name: &str,
        config: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyCache> {
        let config = cache_config(config)?;
        let cache = py.detach(|| self.manager.create_cache(name, config).map_err(Error::from))?;
        Ok(PyCache::new(Backend::Local(cache)))
    }

    /// Removes cache `name` and its entries; whether it existed. Handles on it raise
    /// `weft.CacheRemovedError` from then on.
    fn remove_cache(&self, py: Python<'_>, name: &str) -> bool {
        py.detach(|| self.manager.remove_cache(name))
    }

    /// Statistics summed over every cache.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        statistics_dict(py, &py.detach(|| self.manager.statistics()))
    }

    /// Stops the expiration reaper and the caches' stores. The caches stay readable.
    fn close(&self, py: Python<'_>) {
        py.detach(|| self.manager.shutdown());
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
    ) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        format!(
            "<weft.CacheManager caches={:?}>",
            self.manager.cache_names()
        )
    }
}
