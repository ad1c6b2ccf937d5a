//! What crosses the boundary: keys and values (bytes in, bytes or text out), lifetimes
//! (seconds or `timedelta`), configurations (TOML text or a mapping), and the module's tokio
//! runtime that the grid and the client run on.

use std::borrow::Cow;
use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyUnicodeDecodeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyString};

use crate::error::Error;

/// A key or value from Python: `bytes` (borrowed, no copy), `bytearray` (copied) or `str`
/// (encoded as UTF-8).
#[derive(Debug)]
pub(crate) struct Data<'a>(pub(crate) Cow<'a, [u8]>);

impl std::ops::Deref for Data<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for Data<'a> {
    type Error = PyErr;

    fn extract(object: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if object.is_instance_of::<PyBytes>() {
            // Bytes are immutable: the slice stays valid while the caller holds the object,
            // with or without the GIL.
            let slice: &'a [u8] = object.extract()?;
            return Ok(Self(Cow::Borrowed(slice)));
        }
        if let Ok(text) = object.cast::<PyString>() {
            return Ok(Self(Cow::Owned(text.to_cow()?.into_owned().into_bytes())));
        }
        if let Ok(array) = object.cast::<PyByteArray>() {
            return Ok(Self(Cow::Owned(array.to_vec())));
        }
        Err(PyTypeError::new_err(format!(
            "keys and values are bytes, bytearray or str, not {}",
            object.get_type().name()?
        )))
    }
}

/// How values (and keys) come back to Python: `bytes`, or `str` decoded from UTF-8 for a
/// handle in text mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Bytes,
    Text,
}

impl Mode {
    /// `bytes` as this mode returns them.
    ///
    /// # Errors
    /// `UnicodeDecodeError` for bytes that are not UTF-8 in text mode.
    pub(crate) fn output<'py>(self, py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Self::Bytes => Ok(PyBytes::new(py, bytes).into_any()),
            Self::Text => match std::str::from_utf8(bytes) {
                Ok(text) => Ok(PyString::new(py, text).into_any()),
                Err(error) => Err(PyUnicodeDecodeError::new_err_from_utf8(py, bytes, error)),
            },
        }
    }
}

/// A lifespan or max idle as a caller gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Span {
    /// Not given: the cache's configured default.
    Default,
    /// `math.inf`: never, whatever the cache's default.
    Never,
    /// This long after the write (or the last read, for max idle).
    After(Duration),
}

/// Reads a duration in seconds (`int` or `float`) or a `datetime.timedelta`.
///
/// # Errors
/// `TypeError` for anything else, `ValueError` for a duration that is not positive or too
/// long (`math.inf` only where `infinite_allowed`).
fn seconds(value: &Bound<'_, PyAny>, what: &str, infinite_allowed: bool) -> PyResult<Span> {
    let seconds: f64 = match value.extract::<f64>() {
        Ok(seconds) => seconds,
        Err(_) if value.hasattr("total_seconds")? => {
            value.call_method0("total_seconds")?.extract::<f64>()?
        }
        Err(_) => {
            return Err(PyTypeError::new_err(format!(
                "{what} is seconds (int or float) or a datetime.timedelta, not {}",
                value.get_type().name()?
            )));
        }
    };
    if seconds == f64::INFINITY && infinite_allowed {
        return Ok(Span::Never);
    }
    if seconds.is_nan() || seconds <= 0.0 {
        return Err(PyValueError::new_err(format!(
            "{what} must be longer than zero (None for the cache's default{}), not {seconds}",
            if infinite_allowed {
                ", math.inf for never"
            } else {
                ""
            }
        )));
    }
    Duration::try_from_secs_f64(seconds)
        .map(Span::After)
        .map_err(|_| PyValueError::new_err(format!("{what} of {seconds} s is too long")))
}

/// A lifespan or max idle argument: `None` (the cache's default), seconds, a `timedelta`,
/// or `math.inf` (never).
///
/// # Errors
/// As [`seconds`].
pub(crate) fn span(value: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Span> {
    match value {
        None => Ok(Span::Default),
        Some(value) if value.is_none() => Ok(Span::Default),
        Some(value) => seconds(value, what, true),
    }
}

/// A timeout argument: seconds or a `timedelta`, `default` when absent.
///
/// # Errors
/// As [`seconds`]; a timeout is never infinite.
pub(crate) fn timeout(
    value: Option<&Bound<'_, PyAny>>,
    what: &str,
    default: Duration,
) -> PyResult<Duration> {
    match value {
        Some(value) if !value.is_none() => match seconds(value, what, false)? {
            Span::After(duration) => Ok(duration),
            Span::Default | Span::Never => Ok(default),
        },
        _ => Ok(default),
    }
}

/// The expiration of a write as the embedded engine takes it.
pub(crate) fn write_options(lifespan: Span, max_idle: Span) -> weft_core::WriteOptions {
    let lifetime = |span| match span {
        Span::Default => weft_core::Lifetime::Default,
        Span::Never => weft_core::Lifetime::Never,
        Span::After(duration) => weft_core::Lifetime::After(duration),
    };
    weft_core::WriteOptions::default().expiry(weft_core::Expiry {
        lifespan: lifetime(lifespan),
        max_idle: lifetime(max_idle),
    })
}

/// The expiration of a write as the Hot Rod client takes it.
///
/// # Errors
/// A lifespan with `max_idle = math.inf`: the client's `Expiry` cannot say it.
pub(crate) fn remote_expiry(lifespan: Span, max_idle: Span) -> Result<weft_client::Expiry, Error> {
    use weft_client::Expiry;
    let base = match lifespan {
        Span::Default => Expiry::DEFAULT,
        Span::Never => Expiry::NEVER,
        Span::After(duration) => Expiry::lifespan(duration),
    };
    match (lifespan, max_idle) {
        (_, Span::After(duration)) => Ok(base.with_max_idle(duration)),
        (Span::Never, Span::Never) => Ok(Expiry::NEVER),
        (Span::Default | Span::After(_), Span::Default) => Ok(base),
        (Span::Never, Span::Default) => Err(Error::Unsupported(
            "a remote write with lifespan = math.inf keeps no cache default for max idle; \
             give max_idle too"
                .to_owned(),
        )),
        (Span::Default | Span::After(_), Span::Never) => Err(Error::Unsupported(
            "a remote write cannot combine max_idle = math.inf with a finite or default lifespan"
                .to_owned(),
        )),
    }
}

/// A configuration argument as JSON or TOML text: a mapping is turned into JSON by Python's
/// `json` module, a string is TOML.
pub(crate) enum ConfigText {
    Toml(String),
    Json(String),
}

/// Reads a configuration argument: `str` (TOML) or a mapping (the same keys, kebab-case).
///
/// # Errors
/// `TypeError` for anything else, or what `json.dumps` raises.
pub(crate) fn config_text(value: &Bound<'_, PyAny>) -> PyResult<ConfigText> {
    if let Ok(text) = value.cast::<PyString>() {
        return Ok(ConfigText::Toml(text.to_cow()?.into_owned()));
    }
    let mapping = value.py().import("collections.abc")?.getattr("Mapping")?;
    if value.is_instance(&mapping)? {
        let dict = value
            .py()
            .import("builtins")?
            .getattr("dict")?
            .call1((value,))?;
        let json: String = value
            .py()
            .import("json")?
            .call_method1("dumps", (dict,))?
            .extract()?;
        return Ok(ConfigText::Json(json));
    }
    Err(PyTypeError::new_err(format!(
        "a configuration is TOML text (str) or a mapping, not {}",
        value.get_type().name()?
    )))
}

/// A manager's caches: `None` for one local cache named `default`, else the `[caches.NAME]`
/// tables of a `weft.toml` (TOML text) or `{"caches": {NAME: {...}}}` (a mapping).
///
/// # Errors
/// `weft.ConfigError` with the line and column of the first problem.
pub(crate) fn manager_config(
    value: Option<&Bound<'_, PyAny>>,
) -> PyResult<weft_core::ManagerConfig> {
    let Some(value) = value.filter(|value| !value.is_none()) else {
        return Ok(weft_core::ManagerConfig::default());
    };
    let parsed = match config_text(value)? {
        ConfigText::Toml(text) => weft_core::config::from_toml("<config>", &text),
        ConfigText::Json(text) => weft_core::config::from_json("<config>", &text),
    };
    Ok(parsed.map_err(Error::from)?)
}

/// One cache's configuration: `None` for the defaults (a local cache), else a `[caches.NAME]`
/// table's contents as TOML text or a mapping.
///
/// # Errors
/// `weft.ConfigError` with the line and column of the first problem.
pub(crate) fn cache_config(value: Option<&Bound<'_, PyAny>>) -> PyResult<weft_core::CacheConfig> {
    let Some(value) = value.filter(|value| !value.is_none()) else {
        return Ok(weft_core::CacheConfig::default());
    };
    let parsed = match config_text(value)? {
        ConfigText::Toml(text) => weft_core::CacheConfig::from_toml("<config>", &text),
        ConfigText::Json(text) => weft_core::CacheConfig::from_json("<config>", &text),
    };
    Ok(parsed.map_err(Error::from)?)
}

/// The runtime the grid's members and the client's connections run on, started on first
/// use and kept for the life of the process. Python threads block on it with the GIL
/// released; none of them is one of its workers.
static RUNTIME: OnceLock<std::io::Result<tokio::runtime::Runtime>> = OnceLock::new();

fn runtime() -> Result<&'static tokio::runtime::Runtime, Error> {
    let built = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("weft-py")
            .build()
    });
    built
        .as_ref()
        .map_err(|error| Error::Runtime(format!("start the tokio runtime: {error}")))
}

/// Runs `future` to its end on the module's runtime, blocking this thread (call it with the
/// GIL released).
///
/// # Errors
/// If the runtime cannot start.
pub(crate) fn block_on<F: Future>(future: F) -> Result<F::Output, Error> {
    Ok(runtime()?.block_on(future))
}

/// Starts `future` on the module's runtime without waiting for it (for cleanup in `Drop`).
pub(crate) fn spawn<F>(future: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    if let Ok(runtime) = runtime() {
        drop(runtime.spawn(future));
    }
}
