"""Typed use of the `weft` module, checked by `mypy --strict` in test_typing.py (not run)."""

from __future__ import annotations

import math
from datetime import timedelta

import weft


def embedded() -> None:
    with weft.CacheManager({"caches": {"orders": {"memory": {"max-count": 100}}}}) as manager:
        orders: weft.Cache[bytes] = manager.cache("orders")
        orders.put("k", b"v", lifespan=timedelta(minutes=5), max_idle=30.0)
        orders.put("forever", "v", lifespan=math.inf)
        value: bytes | None = orders.get("k")
        text: weft.Cache[str] = orders.as_text()
        name: str | None = text.get("k")
        found = orders.get_with_version("k")
        if found is not None:
            current, version = found
            applied: bool = orders.replace_if_version("k", current + b"!", version)
            print(applied)
        everything: dict[bytes, bytes] = orders.get_all(["k", "forever"])
        keys: list[str] = text.keys()
        hits = orders.stats()["hits"]
        print(value, name, everything, keys, hits, len(orders), "k" in orders)
        try:
            manager.create_cache("orders")
        except weft.CacheExistsError as error:
            print(error)


def clustered() -> None:
    with weft.Grid("a", "127.0.0.1:0", [], secret="s", caches='[caches.c]\nmode = "distributed"\n') as grid:
        grid.wait_stable(1, timeout=timedelta(seconds=30))
        cache = grid.define_cache("d", {"mode": "replicated"})
        cache["k"] = "v"
        members: list[str] = grid.members()
        print(members, grid.address)


def remote() -> None:
    with weft.RemoteCacheManager(["127.0.0.1:11222"], request_timeout=2.5, near_cache_entries=10) as client:
        cache = client.cache("default")
        stored: bool = cache.put_if_absent(b"k", "v")
        near = cache.near_cache_stats()
        print(stored, near["hits"] if near is not None else 0)
