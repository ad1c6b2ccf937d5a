//! `weft.Cache`: one Python class over the three kinds of cache — a local one in this process
//! (`weft_core::Cache`), a clustered one reached through this process's grid member
//! (`weft_grid::GridCache`), and one on a server (`weft_client::RemoteCache`). Every call
//! releases the GIL while the engine works; the grid's and the client's calls block this
//! thread on the module's runtime.

use bytes::Bytes;
use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyIterator, PyList, PyTuple};
use weft_core::{CacheStatistics, WriteOptions};

use crate::convert::{Data, Mode, block_on, remote_expiry, span, write_options};
use crate::error::Error;

/// Which engine a handle reaches.
#[derive(Clone)]
pub(crate) enum Backend {
    Local(weft_core::Cache),
    Grid(weft_grid::GridCache),
    Remote(weft_client::RemoteCache),
}

impl Backend {
    fn kind(&self) -> &'static str {
        match self {
            Self::Local(_) => "local",
            Self::Grid(_) => "grid",
            Self::Remote(_) => "remote",
        }
    }

    fn name(&self) -> &str {
        match self {
            Self::Local(cache) => cache.name(),
            Self::Grid(cache) => cache.name(),
            Self::Remote(cache) => cache.name(),
        }
    }
}

/// A handle on a named cache. Keys and values are `bytes`, `bytearray` or `str` (stored as
/// UTF-8); values come back as `bytes`, or as `str` from a handle made by `as_text()`.
#[pyclass(frozen, generic, module = "weft", name = "Cache")]
pub(crate) struct PyCache {
    backend: Backend,
    mode: Mode,
}

impl PyCache {
    pub(crate) fn new(backend: Backend) -> Self {
        Self {
            backend,
            mode: Mode::Bytes,
        }
    }

    fn unsupported(&self, what: &str) -> Error {
        Error::Unsupported(format!(
            "{what} is not available on a {} cache",
            self.backend.kind()
        ))
    }

    fn write(
        &self,
        py: Python<'_>,
        key: &[u8],
        value: &[u8],
        lifespan: Option<&Bound<'_, PyAny>>,
        max_idle: Option<&Bound<'_, PyAny>>,
        how: Write,
    ) -> PyResult<bool> {
        let (lifespan, max_idle) = (span(lifespan, "lifespan")?, span(max_idle, "max_idle")?);
        let options = write_options(lifespan, max_idle);
        let done = py.detach(|| -> Result<bool, Error> {
            match &self.backend {
                Backend::Local(cache) => local_write(cache, key, value, &options, how),
                Backend::Grid(cache) => block_on(grid_write(cache, key, value, &options, how))?,
                Backend::Remote(cache) => {
                    let expiry = remote_expiry(lifespan, max_idle)?;
                    block_on(remote_write(cache, key, value, expiry, how))?
                }
            }
        })?;
        Ok(done)
    }

    fn entries(&self, py: Python<'_>) -> PyResult<Vec<(Bytes, Bytes)>> {
        let entries = py.detach(|| -> Result<Vec<(Bytes, Bytes)>, Error> {
            match &self.backend {
                Backend::Local(cache) => Ok(cache
                    .iter()
                    .map(|entry| (entry.key_bytes(), entry.value_bytes()))
                    .collect()),
                Backend::Grid(cache) => Ok(block_on(cache.entries())??
                    .into_iter()
                    .map(|entry| (entry.key_bytes(), entry.value_bytes()))
                    .collect()),
                Backend::Remote(_) => Err(self.unsupported("iteration")),
            }
        })?;
        Ok(entries)
    }
}

/// The kinds of unconditional and conditional writes, and whether each applied.
#[derive(Debug, Clone, Copy)]
enum Write {
    Put,
    PutIfAbsent,
    Replace,
    ReplaceIfVersion(u64),
}

fn local_write(
    cache: &weft_core::Cache,
    key: &[u8],
    value: &[u8],
    options: &WriteOptions,
    how: Write,
) -> Result<bool, Error> {
    Ok(match how {
        Write::Put => {
            cache.put(key, value, &options.ignore_return_values())?;
            true
        }
        Write::PutIfAbsent => cache.put_if_absent(key, value, options)?.is_none(),
        Write::Replace => cache.replace(key, value, options)?.is_some(),
        Write::ReplaceIfVersion(version) => cache
            .replace_if_version(key, version, value, options)?
            .is_done(),
    })
}

async fn grid_write(
    cache: &weft_grid::GridCache,
    key: &[u8],
    value: &[u8],
    options: &WriteOptions,
    how: Write,
) -> Result<bool, Error> {
    Ok(match how {
        Write::Put => {
            cache
                .put(key, value, &options.ignore_return_values())
                .await?;
            true
        }
        Write::PutIfAbsent => cache.put_if_absent(key, value, options).await?.is_none(),
        Write::Replace => cache.replace(key, value, options).await?.is_some(),
        Write::ReplaceIfVersion(version) => cache
            .replace_if_version(key, version, value, options)
            .await?
            .is_done(),
    })
}

async fn remote_write(
    cache: &weft_client::RemoteCache,
    key: &[u8],
    value: &[u8],
    expiry: weft_client::Expiry,
    how: Write,
) -> Result<bool, Error> {
    Ok(match how {
        Write::Put => {
            cache.put_with(key, value, expiry).await?;
            true
        }
        Write::PutIfAbsent => cache.put_if_absent(key, value, expiry).await?,
        Write::Replace => cache.replace(key, value, expiry).await?,
        Write::ReplaceIfVersion(version) => {
            cache
                .replace_with_version(key, value, version, expiry)
                .await?
        }
    })
}

/// Statistics of a manager or a cache as a `dict`.
///
/// # Errors
/// If Python cannot build the dict.
pub(crate) fn statistics_dict<'py>(
    py: Python<'py>,
    stats: &CacheStatistics,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("enabled", stats.enabled)?;
    for (name, value) in [
        ("hits", stats.hits),
        ("misses", stats.misses),
        ("stores", stats.stores),
        ("remove_hits", stats.remove_hits),
        ("remove_misses", stats.remove_misses),
        ("evictions", stats.evictions),
        ("expirations", stats.expirations),
        ("average_read_time_nanos", stats.average_read_time_nanos),
        ("average_write_time_nanos", stats.average_write_time_nanos),
        ("average_remove_time_nanos", stats.average_remove_time_nanos),
        ("entries", stats.entries),
        ("memory_bytes", stats.memory_bytes),
        ("time_since_start_secs", stats.time_since_start_secs),
        ("time_since_reset_secs", stats.time_since_reset_secs),
    ] {
        dict.set_item(name, value)?;
    }
    Ok(dict)
}

#[pymethods]
impl PyCache {
    /// The cache's name.
    #[getter]
    fn name(&self) -> &str {
        self.backend.name()
    }

    /// "local", "grid" or "remote".
    #[getter]
    fn kind(&self) -> &'static str {
        self.backend.kind()
    }

    /// Whether values (and keys) come back as `str`.
    #[getter]
    fn text(&self) -> bool {
        self.mode == Mode::Text
    }

    /// The same cache, returning values and keys as `str` (decoded from UTF-8).
    fn as_text(&self) -> Self {
        Self {
            backend: self.backend.clone(),
            mode: Mode::Text,
        }
    }

    /// The same cache, returning values and keys as `bytes`.
    fn as_bytes(&self) -> Self {
        Self {
            backend: self.backend.clone(),
            mode: Mode::Bytes,
        }
    }

    /// The value of `key`, or `None`.
    fn get<'py>(&self, py: Python<'py>, key: Data<'_>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let value = py.detach(|| -> Result<Option<Bytes>, Error> {
            match &self.backend {
                Backend::Local(cache) => Ok(cache.get(&key)?),
                Backend::Grid(cache) => Ok(block_on(cache.get(&key))??),
                Backend::Remote(cache) => Ok(block_on(cache.get(&*key))??),
            }
        })?;
        value.map(|value| self.mode.output(py, &value)).transpose()
    }

    /// The value of `key` and its version (for `replace_if_version` and
    /// `remove_if_version`), or `None`.
    fn get_with_version<'py>(
        &self,
        py: Python<'py>,
        key: Data<'_>,
    ) -> PyResult<Option<(Bound<'py, PyAny>, u64)>> {
        let found = py.detach(|| -> Result<Option<(Bytes, u64)>, Error> {
            let local = |entry: weft_core::CacheEntry| (entry.value_bytes(), entry.version());
            match &self.backend {
                Backend::Local(cache) => Ok(cache.get_entry(&key)?.map(local)),
                Backend::Grid(cache) => Ok(block_on(cache.get_entry(&key))??.map(local)),
                Backend::Remote(cache) => Ok(block_on(cache.get_with_metadata(&*key))??
                    .map(|entry| (entry.value, entry.version))),
            }
        })?;
        found
            .map(|(value, version)| Ok((self.mode.output(py, &value)?, version)))
            .transpose()
    }

    /// Stores `value` under `key`. `lifespan` and `max_idle` are seconds or `timedelta`s;
    /// `None` keeps the cache's configured default, `math.inf` means never.
    #[pyo3(signature = (key, value, lifespan = None, max_idle = None))]
    fn put(
        &self,
        py: Python<'_>,
        key: Data<'_>,
        value: Data<'_>,
        lifespan: Option<&Bound<'_, PyAny>>,
        max_idle: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.write(py, &key, &value, lifespan, max_idle, Write::Put)?;
        Ok(())
    }

    /// Stores `value` only if `key` has none; whether it stored it.
    #[pyo3(signature = (key, value, lifespan = None, max_idle = None))]
    fn put_if_absent(
        &self,
        py: Python<'_>,
        key: Data<'_>,
        value: Data<'_>,
        lifespan: Option<&Bound<'_, PyAny>>,
        max_idle: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.write(py, &key, &value, lifespan, max_idle, Write::PutIfAbsent)
    }

    /// Stores `value` only if `key` has one; whether it stored it.
    #[pyo3(signature = (key, value, lifespan = None, max_idle = None))]
    fn replace(
        &self,
        py: Python<'_>,
        key: Data<'_>,
        value: Data<'_>,
        lifespan: Option<&Bound<'_, PyAny>>,
        max_idle: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.write(py, &key, &value, lifespan, max_idle, Write::Replace)
    }

    /// Stores `value` only if `key`'s entry still has `version` (from `get_with_version`);
    /// whether it stored it.
    #[pyo3(signature = (key, value, version, lifespan = None, max_idle = None))]
    fn replace_if_version(
        &self,
        py: Python<'_>,
        key: Data<'_>,
        value: Data<'_>,
        version: u64,
        lifespan: Option<&Bound<'_, PyAny>>,
        max_idle: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let how = Write::ReplaceIfVersion(version);
        self.write(py, &key, &value, lifespan, max_idle, how)
    }

    /// Removes `key`; whether it had a value.
    fn remove(&self, py: Python<'_>, key: Data<'_>) -> PyResult<bool> {
        let removed = py.detach(|| -> Result<bool, Error> {
            let options = WriteOptions::default();
            match &self.backend {
                Backend::Local(cache) => Ok(cache.delete(&key)?),
                Backend::Grid(cache) => Ok(block_on(cache.remove(&key, &options))??.is_some()),
                Backend::Remote(cache) => Ok(block_on(cache.remove(&*key))??),
            }
        })?;
        Ok(removed)
    }

    /// Removes `key` only if its entry still has `version`; whether it removed it.
    fn remove_if_version(&self, py: Python<'_>, key: Data<'_>, version: u64) -> PyResult<bool> {
        let removed = py.detach(|| -> Result<bool, Error> {
            let options = WriteOptions::default();
            match &self.backend {
                Backend::Local(cache) => {
                    Ok(cache.remove_if_version(&key, version, &options)?.is_done())
                }
                Backend::Grid(cache) => {
                    Ok(block_on(cache.remove_if_version(&key, version, &options))??.is_done())
                }
                Backend::Remote(cache) => Ok(block_on(cache.remove_with_version(&*key, version))??),
            }
        })?;
        Ok(removed)
    }

    /// Whether `key` has a value.
    fn contains(&self, py: Python<'_>, key: Data<'_>) -> PyResult<bool> {
        let found = py.detach(|| -> Result<bool, Error> {
            match &self.backend {
                Backend::Local(cache) => Ok(cache.contains(&key)?),
                Backend::Grid(cache) => Ok(block_on(cache.contains(&key))??),
                Backend::Remote(cache) => Ok(block_on(cache.contains_key(&*key))??),
            }
        })?;
        Ok(found)
    }

    /// The values of those of `keys` that have one, by key.
    fn get_all<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut wanted: Vec<Vec<u8>> = Vec::new();
        for key in PyIterator::from_object(keys)? {
            let key = key?;
            wanted.push(key.extract::<Data<'_>>()?.0.into_owned());
        }
        let found = py.detach(|| -> Result<Vec<(Bytes, Bytes)>, Error> {
            match &self.backend {
                Backend::Local(cache) => Ok(cache
                    .get_all(wanted.iter().map(Vec::as_slice))?
                    .into_iter()
                    .map(|entry| (entry.key_bytes(), entry.value_bytes()))
                    .collect()),
                Backend::Grid(cache) => Ok(block_on(cache.get_all(wanted))??
                    .into_iter()
                    .map(|(key, entry)| (Bytes::from(key), entry.value_bytes()))
                    .collect()),
                Backend::Remote(cache) => {
                    Ok(block_on(cache.get_all(wanted))??.into_iter().collect())
                }
            }
        })?;
        let dict = PyDict::new(py);
        for (key, value) in found {
            dict.set_item(self.mode.output(py, &key)?, self.mode.output(py, &value)?)?;
        }
        Ok(dict)
    }

    /// Stores every pair of `entries` (a mapping), with the same expiration.
    #[pyo3(signature = (entries, lifespan = None, max_idle = None))]
    fn put_all(
        &self,
        py: Python<'_>,
        entries: &Bound<'_, PyAny>,
        lifespan: Option<&Bound<'_, PyAny>>,
        max_idle: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let (lifespan, max_idle) = (span(lifespan, "lifespan")?, span(max_idle, "max_idle")?);
        let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let items = entries.call_method0("items")?;
        for item in PyIterator::from_object(&items)? {
            let item = item?;
            let (key, value): (Data<'_>, Data<'_>) = item.extract()?;
            pairs.push((key.0.into_owned(), value.0.into_owned()));
        }
        let options = write_options(lifespan, max_idle);
        py.detach(|| -> Result<(), Error> {
            match &self.backend {
                Backend::Local(cache) => Ok(cache.put_all(
                    pairs
                        .iter()
                        .map(|(key, value)| (key.as_slice(), value.as_slice())),
                    &options,
                )?),
                Backend::Grid(cache) => Ok(block_on(cache.put_all(pairs, &options))??),
                Backend::Remote(cache) => {
                    let expiry = remote_expiry(lifespan, max_idle)?;
                    Ok(block_on(cache.put_all(pairs, expiry))??)
                }
            }
        })?;
        Ok(())
    }

    /// Removes every entry.
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| -> Result<(), Error> {
            match &self.backend {
                Backend::Local(cache) => Ok(cache.clear()?),
                Backend::Grid(cache) => Ok(block_on(cache.clear())??),
                Backend::Remote(cache) => Ok(block_on(cache.clear())??),
            }
        })?;
        Ok(())
    }

    /// The number of entries (a grid's or a server's: the whole cluster's).
    fn size(&self, py: Python<'_>) -> PyResult<u64> {
        let size = py.detach(|| -> Result<u64, Error> {
            match &self.backend {
                Backend::Local(cache) => Ok(u64::try_from(cache.size()).unwrap_or(u64::MAX)),
                Backend::Grid(cache) => Ok(block_on(cache.size())??),
                Backend::Remote(cache) => Ok(block_on(cache.size())??),
            }
        })?;
        Ok(size)
    }

    /// Every key, read segment by segment: a key written or removed meanwhile may or may
    /// not be listed. Not available on a remote cache.
    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for (key, _) in self.entries(py)? {
            list.append(self.mode.output(py, &key)?)?;
        }
        Ok(list)
    }

    /// Every entry as `(key, value)` pairs, read as `keys()` reads them.
    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for (key, value) in self.entries(py)? {
            let pair = PyTuple::new(
                py,
                [self.mode.output(py, &key)?, self.mode.output(py, &value)?],
            )?;
            list.append(pair)?;
        }
        Ok(list)
    }

    /// Statistics. Local: this cache's; grid: this member's copy of the cache; remote: what
    /// the server reports (integers where they are numbers).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        match &self.backend {
            Backend::Local(cache) => statistics_dict(py, &py.detach(|| cache.statistics())),
            Backend::Grid(cache) => statistics_dict(py, &py.detach(|| cache.local().statistics())),
            Backend::Remote(cache) => {
                let stats = py.detach(|| -> Result<_, Error> { Ok(block_on(cache.stats())??) })?;
                let dict = PyDict::new(py);
                for (name, value) in stats {
                    match value.parse::<i64>() {
                        Ok(number) => dict.set_item(name, number)?,
                        Err(_) => dict.set_item(name, value)?,
                    }
                }
                Ok(dict)
            }
        }
    }

    /// A remote cache's near-cache counters (hits, misses, stale, invalidations, entries),
    /// or `None` without a near cache.
    fn near_cache_stats<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Backend::Remote(cache) = &self.backend else {
            return Ok(None);
        };
        let Some(stats) = cache.near_cache_stats() else {
            return Ok(None);
        };
        let dict = PyDict::new(py);
        dict.set_item("hits", stats.hits)?;
        dict.set_item("misses", stats.misses)?;
        dict.set_item("stale", stats.stale)?;
        dict.set_item("invalidations", stats.invalidations)?;
        dict.set_item("entries", stats.entries)?;
        Ok(Some(dict))
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match self.get(py, key.extract()?)? {
            Some(value) => Ok(value),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    fn __setitem__(&self, py: Python<'_>, key: Data<'_>, value: Data<'_>) -> PyResult<()> {
        self.put(py, key, value, None, None)
    }

    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        if self.remove(py, key.extract()?)? {
            Ok(())
        } else {
            Err(PyKeyError::new_err(key.clone().unbind()))
        }
    }

    fn __contains__(&self, py: Python<'_>, key: Data<'_>) -> PyResult<bool> {
        self.contains(py, key)
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        let size = self.size(py)?;
        Ok(usize::try_from(size).unwrap_or(usize::MAX))
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyIterator>> {
        PyIterator::from_object(self.keys(py)?.as_any())
    }

    fn __repr__(&self) -> String {
        format!(
            "<weft.Cache '{}' ({}{})>",
            self.backend.name(),
            self.backend.kind(),
            if self.mode == Mode::Text {
                ", text"
            } else {
                ""
            }
        )
    }
}
