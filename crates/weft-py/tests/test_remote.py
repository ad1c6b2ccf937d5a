"""The Hot Rod client against a real `weft server` ($WEFT_BIN): round trips, conditional and
versioned writes, expiration, the near cache, errors; and that a blocked call releases the
GIL."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

import weft
from support import eventually, free_port


@pytest.fixture(scope="module")
def remote(weft_server: int) -> Iterator[weft.RemoteCacheManager]:
    with weft.RemoteCacheManager([f"127.0.0.1:{weft_server}"]) as client:
        yield client


@pytest.fixture
def cache(remote: weft.RemoteCacheManager) -> Iterator[weft.Cache[bytes]]:
    cache = remote.cache("default")
    cache.clear()
    yield cache


def test_round_trip(cache: weft.Cache[bytes]) -> None:
    # Proves put/get/contains/remove/len over Hot Rod, str and bytes alike.
    assert cache.kind == "remote"
    cache.put("k", "v")
    cache[b"bin"] = b"\x00\x01"
    assert cache.get("k") == b"v"
    assert cache.as_text()["k"] == "v"
    assert cache[b"bin"] == b"\x00\x01"
    assert "k" in cache and "absent" not in cache
    assert len(cache) == 2
    assert cache.remove("k") is True
    assert cache.remove("k") is False
    with pytest.raises(KeyError):
        cache["k"]


def test_conditional_versioned_and_bulk_writes(cache: weft.Cache[bytes]) -> None:
    # Proves the server decides conditional writes, and versions read back compare-and-set.
    assert cache.put_if_absent("k", "1") is True
    assert cache.put_if_absent("k", "2") is False
    assert cache.replace("k", "3") is True
    assert cache.replace("absent", "x") is False
    found = cache.get_with_version("k")
    assert found is not None and found[0] == b"3"
    assert cache.replace_if_version("k", "4", found[1]) is True
    assert cache.replace_if_version("k", "5", found[1]) is False
    assert cache.remove_if_version("k", found[1]) is False
    assert cache.get("k") == b"4"
    cache.put_all({"a": "1", "b": "2"})
    assert cache.get_all(["a", "b", "c"]) == {b"a": b"1", b"b": b"2"}
    cache.clear()
    assert len(cache) == 0


def test_the_server_holds_what_the_embedded_api_reads(
    remote: weft.RemoteCacheManager, weft_server: int
) -> None:
    # Proves a second client sees the first one's writes (the server holds them).
    remote.cache("other").put("shared", "yes")
    with weft.RemoteCacheManager([f"127.0.0.1:{weft_server}"], intelligence="basic") as second:
        assert second.cache("other").get("shared") == b"yes"


def test_lifespan_expires_on_the_server(cache: weft.Cache[bytes]) -> None:
    # Proves lifespans travel with the write (sub-second, as protocol 4.0 carries them).
    cache.put("short", "v", lifespan=0.3)
    cache.put("long", "v", lifespan=3600)
    assert cache.get("short") == b"v"
    eventually(lambda: cache.get("short") is None, timeout_s=10, what="remote entry expired")
    assert cache.get("long") == b"v"


def test_statistics_and_unsupported_iteration(cache: weft.Cache[bytes]) -> None:
    # Proves stats() reports the server's numbers as ints, and keys() says it is not there.
    cache.put("k", "v")
    cache.get("k")
    stats = cache.stats()
    assert isinstance(stats.get("hits"), int) and stats["hits"] >= 1
    with pytest.raises(weft.UnsupportedError):
        cache.keys()
    with pytest.raises(weft.UnsupportedError):
        list(cache)


def test_near_cache_serves_repeated_reads(weft_server: int) -> None:
    # Proves the near cache answers a second read and counts it.
    with weft.RemoteCacheManager(
        [f"127.0.0.1:{weft_server}"], near_cache_entries=100, near_cache_staleness=5
    ) as near:
        cache = near.cache("default")
        cache.put("hot", "v")
        assert cache.get("hot") == b"v"
        assert cache.get("hot") == b"v"
        stats = cache.near_cache_stats()
        assert stats is not None and stats["hits"] >= 1


def test_missing_cache_and_unreachable_server(remote: weft.RemoteCacheManager) -> None:
    # Proves the client's failures map to their exceptions.
    with pytest.raises(weft.CacheNotFoundError):
        remote.cache("no-such-cache")
    with pytest.raises(weft.TransportError):
        weft.RemoteCacheManager([f"127.0.0.1:{free_port()}"], connect_timeout=1, retries=0)
    with pytest.raises(ValueError):
        weft.RemoteCacheManager(["not an address"])


def test_a_blocked_call_lets_other_threads_run() -> None:
    # Proves the GIL is released while the client waits: a server that accepts but never
    # answers holds the connect for its timeout, and a Python thread counts meanwhile.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    port = silent.getsockname()[1]
    stop = threading.Event()
    ticks = 0

    def counter() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    thread = threading.Thread(target=counter)
    thread.start()
    try:
        started = time.monotonic()
        with pytest.raises(weft.TransportError):
            weft.RemoteCacheManager([f"127.0.0.1:{port}"], connect_timeout=1, retries=0)
        waited = time.monotonic() - started
        before = ticks
    finally:
        stop.set()
        thread.join(timeout=10)
        silent.close()
    assert waited >= 0.9
    # Holding the GIL for the whole second would leave the counter at a handful of ticks.
    assert before > 100, f"only {before} ticks while the client waited {waited:.2f} s"
