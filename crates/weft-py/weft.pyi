"""Weft's caches for Python: embedded (local and grid) and the Hot Rod client.

Keys and values are ``bytes``, ``bytearray`` or ``str`` (stored as UTF-8). Values and keys
come back as ``bytes``; a handle from ``Cache.as_text()`` returns ``str`` instead.
Lifespans, max idle times and timeouts are seconds (``int`` or ``float``) or
``datetime.timedelta``; ``None`` keeps the cache's configured default, ``math.inf`` means
never.
"""

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, Generic, Literal, TypeVar, Union

__version__: str

_V = TypeVar("_V", bytes, str)

_Data = Union[bytes, bytearray, str]
"""What a key or a value may be given as."""

_Seconds = Union[int, float, timedelta]
"""A duration: seconds, or a timedelta."""

_Config = Union[str, Mapping[str, Any]]
"""A configuration: TOML text, or a mapping with the same (kebab-case) keys."""

class Cache(Generic[_V]):
    """A named cache: local, a grid member's clustered cache, or one on a server."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> Literal["local", "grid", "remote"]: ...
    @property
    def text(self) -> bool:
        """Whether values and keys come back as ``str``."""

    def as_text(self) -> Cache[str]:
        """The same cache, returning values and keys as ``str`` (decoded from UTF-8)."""

    def as_bytes(self) -> Cache[bytes]:
        """The same cache, returning values and keys as ``bytes``."""

    def get(self, key: _Data) -> _V | None:
        """The value of ``key``, or ``None``."""

    def get_with_version(self, key: _Data) -> tuple[_V, int] | None:
        """The value of ``key`` and its version, or ``None``."""

    def put(
        self,
        key: _Data,
        value: _Data,
        lifespan: _Seconds | None = None,
        max_idle: _Seconds | None = None,
    ) -> None:
        """Stores ``value`` under ``key``."""

    def put_if_absent(
        self,
        key: _Data,
        value: _Data,
        lifespan: _Seconds | None = None,
        max_idle: _Seconds | None = None,
    ) -> bool:
        """Stores ``value`` only if ``key`` has none; whether it stored it."""

    def replace(
        self,
        key: _Data,
        value: _Data,
        lifespan: _Seconds | None = None,
        max_idle: _Seconds | None = None,
    ) -> bool:
        """Stores ``value`` only if ``key`` has one; whether it stored it."""

    def replace_if_version(
        self,
        key: _Data,
        value: _Data,
        version: int,
        lifespan: _Seconds | None = None,
        max_idle: _Seconds | None = None,
    ) -> bool:
        """Stores ``value`` only if ``key``'s entry still has ``version``."""

    def remove(self, key: _Data) -> bool:
        """Removes ``key``; whether it had a value."""

    def remove_if_version(self, key: _Data, version: int) -> bool:
        """Removes ``key`` only if its entry still has ``version``."""

    def contains(self, key: _Data) -> bool: ...
    def get_all(self, keys: Iterable[_Data]) -> dict[_V, _V]:
        """The values of those of ``keys`` that have one, by key."""

    def put_all(
        self,
        entries: Mapping[Any, _Data],
        lifespan: _Seconds | None = None,
        max_idle: _Seconds | None = None,
    ) -> None:
        """Stores every pair of ``entries`` (keys: bytes, bytearray or str)."""

    def clear(self) -> None: ...
    def size(self) -> int:
        """The number of entries (a grid's or a server's: the whole cluster's)."""

    def keys(self) -> list[_V]:
        """Every key, read segment by segment (not on a remote cache: UnsupportedError)."""

    def items(self) -> list[tuple[_V, _V]]:
        """Every entry, read as ``keys()`` reads them."""

    def stats(self) -> dict[str, int | str]:
        """Statistics: the cache's (local), this member's copy (grid), the server's (remote)."""

    def near_cache_stats(self) -> dict[str, int] | None:
        """A remote cache's near-cache counters, or ``None``."""

    def __getitem__(self, key: _Data) -> _V: ...
    def __setitem__(self, key: _Data, value: _Data) -> None: ...
    def __delitem__(self, key: _Data) -> None: ...
    def __contains__(self, key: object) -> bool: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[_V]: ...

class CacheManager:
    """Local caches in this process."""

    def __init__(self, config: _Config | None = None) -> None:
        """``None``: one local cache, ``default``; else ``[caches.NAME]`` tables (TOML) or
        ``{"caches": {NAME: {...}}}``."""

    def cache(self, name: str) -> Cache[bytes]:
        """The cache ``name``; CacheNotFoundError if there is none."""

    def cache_names(self) -> list[str]: ...
    def create_cache(self, name: str, config: _Config | None = None) -> Cache[bytes]:
        """Creates cache ``name``; CacheExistsError if it exists."""

    def remove_cache(self, name: str) -> bool: ...
    def stats(self) -> dict[str, int | str]:
        """Statistics summed over every cache."""

    def close(self) -> None:
        """Stops the expiration reaper and the caches' stores."""

    def __enter__(self) -> CacheManager: ...
    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool: ...

class Grid:
    """A grid member in this process: its caches, local and clustered."""

    def __init__(
        self,
        name: str,
        listen: str = "127.0.0.1:0",
        join: Sequence[str] = (),
        *,
        secret: str | None = None,
        caches: _Config | None = None,
    ) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def address(self) -> str:
        """The cluster address (``host:port``) others join."""

    @property
    def left(self) -> bool: ...
    def members(self) -> list[str]: ...
    def is_stable_with(self, members: int) -> bool: ...
    def wait_stable(self, members: int, timeout: _Seconds | None = None) -> None:
        """Waits until every clustered cache is stable over ``members`` members."""

    def cache(self, name: str) -> Cache[bytes]: ...
    def cache_names(self) -> list[str]: ...
    def define_cache(self, name: str, config: _Config | None = None) -> Cache[bytes]:
        """Defines cache ``name`` on every member."""

    def leave(self) -> None:
        """Leaves the cluster gracefully; the others take over this member's data."""

    def __enter__(self) -> Grid: ...
    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool: ...

class RemoteCacheManager:
    """A Hot Rod client of Weft (or Infinispan) servers."""

    def __init__(
        self,
        servers: Sequence[str] = ("127.0.0.1:11222",),
        *,
        connect_timeout: _Seconds | None = None,
        request_timeout: _Seconds | None = None,
        retries: int = 3,
        intelligence: Literal["basic", "topology", "hash"] = "hash",
        protocol_version: int | None = None,
        near_cache_entries: int | None = None,
        near_cache_staleness: _Seconds | None = None,
    ) -> None: ...
    def cache(self, name: str) -> Cache[bytes]:
        """The server's cache ``name``; CacheNotFoundError if it has none."""

    def close(self) -> None: ...
    def __enter__(self) -> RemoteCacheManager: ...
    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool: ...

class WeftError(Exception): ...
class CacheNotFoundError(WeftError): ...
class CacheExistsError(WeftError): ...
class CacheFullError(WeftError): ...
class EntryTooLargeError(WeftError): ...
class CacheRemovedError(WeftError): ...
class ConfigError(WeftError): ...
class PersistenceError(WeftError): ...
class ClusterError(WeftError): ...
class TransportError(WeftError): ...
class ServerError(WeftError): ...
class UnsupportedError(WeftError): ...
class ClosedError(WeftError): ...
