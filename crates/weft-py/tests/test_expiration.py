"""Expiration through the Python API: per-write lifespans and max idle times (seconds or
timedelta), the cache's default, and `math.inf` overriding it. Each test polls with a
bounded deadline rather than sleeping a fixed time."""

from __future__ import annotations

import math
import time
from datetime import timedelta

import weft
from support import eventually


def test_lifespan_in_seconds_expires_the_entry(cache: weft.Cache[bytes]) -> None:
    # Proves a short lifespan removes the entry while an immortal neighbour stays.
    cache.put("mortal", "v", lifespan=0.3)
    cache.put("immortal", "v")
    assert cache.get("mortal") == b"v"
    eventually(lambda: cache.get("mortal") is None, timeout_s=10, what="mortal entry expired")
    assert cache.get("immortal") == b"v"


def test_lifespan_as_timedelta(cache: weft.Cache[bytes]) -> None:
    # Proves a timedelta is read as its total seconds (a long one keeps the entry).
    cache.put("short", "v", lifespan=timedelta(milliseconds=300))
    cache.put("long", "v", lifespan=timedelta(hours=1))
    eventually(lambda: "short" not in cache, timeout_s=10, what="short entry expired")
    assert cache.get("long") == b"v"


def test_max_idle_expires_an_unread_entry(cache: weft.Cache[bytes]) -> None:
    # Proves max idle: reads keep the entry alive past its idle time, then it expires unread.
    cache.put("idle", "v", max_idle=0.5)
    started = time.monotonic()
    while time.monotonic() - started < 1.0:
        assert cache.get("idle") == b"v", "read within max idle must find the entry"
        time.sleep(0.1)
    # Listing keys is not a read: polling with it lets the entry go idle.
    eventually(lambda: b"idle" not in cache.keys(), timeout_s=10, what="idle entry expired")
    assert cache.get("idle") is None


def test_cache_default_applies_and_math_inf_overrides_it() -> None:
    # Proves None takes the cache's default lifespan and math.inf means never.
    config = '[caches.sessions]\nexpiration = { lifespan = "300ms" }\n'
    with weft.CacheManager(config) as manager:
        sessions = manager.cache("sessions")
        sessions.put("default", "v")
        sessions.put("forever", "v", lifespan=math.inf)
        eventually(lambda: sessions.get("default") is None, timeout_s=10,
                   what="entry with the cache's default lifespan expired")
        assert sessions.get("forever") == b"v"


def test_expired_entries_leave_size_and_keys(cache: weft.Cache[bytes]) -> None:
    # Proves the reaper (started with the manager) purges: the count drops without reads.
    for i in range(50):
        cache.put(f"k{i}", "v", lifespan=0.2)
    cache.put("kept", "v")
    eventually(lambda: len(cache) == 1, timeout_s=10, what="reaper purged expired entries")
    assert cache.keys() == [b"kept"]
