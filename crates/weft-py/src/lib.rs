//! `weft-py` is the `weft` Python module: Weft's embedded caches — local ones
//! ([`weft_core::CacheManager`]) and a grid member's clustered ones ([`weft_grid::Grid`]) — and
//! the Hot Rod client ([`weft_client::Client`]), built with pyo3 for CPython's stable ABI
//! (abi3, 3.9 and later) and packaged by maturin (`pyproject.toml`).
//!
//! It owns the translation only: Python arguments to keys, values, lifetimes and
//! configurations, engine errors to Python exceptions (`weft.WeftError` and its subclasses),
//! and a tokio runtime of its own that the grid and the client run on. It must not hold
//! cache logic: every operation is one call into the engines, made with the GIL released
//! (`Python::detach`), so other Python threads run while a cache works or a request travels.
//! The Python-facing contract (signatures, types) is `weft.pyi` beside this crate, checked by
//! the pytest suite in `tests/` under `mypy --strict`.

mod cache;
mod convert;
mod error;
mod grid;
mod manager;
mod remote;

use pyo3::prelude::*;

/// The `weft` module.
#[pymodule]
fn weft(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    module.add_class::<cache::PyCache>()?;
    module.add_class::<manager::PyCacheManager>()?;
    module.add_class::<grid::PyGrid>()?;
    module.add_class::<remote::PyRemoteCacheManager>()?;
    module.add("WeftError", py.get_type::<error::WeftError>())?;
    module.add(
        "CacheNotFoundError",
        py.get_type::<error::CacheNotFoundError>(),
    )?;
    module.add("CacheExistsError", py.get_type::<error::CacheExistsError>())?;
    module.add("CacheFullError", py.get_type::<error::CacheFullError>())?;
    module.add(
        "EntryTooLargeError",
        py.get_type::<error::EntryTooLargeError>(),
    )?;
    module.add(
        "CacheRemovedError",
        py.get_type::<error::CacheRemovedError>(),
    )?;
    module.add("ConfigError", py.get_type::<error::ConfigError>())?;
    module.add("PersistenceError", py.get_type::<error::PersistenceError>())?;
    module.add("ClusterError", py.get_type::<error::ClusterError>())?;
    module.add("TransportError", py.get_type::<error::TransportError>())?;
    module.add("ServerError", py.get_type::<error::ServerError>())?;
    module.add("UnsupportedError", py.get_type::<error::UnsupportedError>())?;
    module.add("ClosedError", py.get_type::<error::ClosedError>())?;
    Ok(())
}
