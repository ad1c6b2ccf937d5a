"""Local caches in this process: round trips, conditional and versioned writes, bulk
operations, iteration, statistics, configuration and errors."""

from __future__ import annotations

import threading

import pytest

import weft


def test_round_trip_of_bytes_str_and_bytearray(cache: weft.Cache[bytes]) -> None:
    # Proves each accepted type is stored as its bytes (str as UTF-8) and read back as bytes.
    cache.put(b"k1", b"v1")
    cache.put("k2", "välue")
    cache.put(bytearray(b"k3"), bytearray(b"\x00\xff"))
    assert cache.get(b"k1") == b"v1"
    assert cache.get(b"k2") == "välue".encode()
    assert cache.get("k2") == "välue".encode()
    assert cache.get(b"k3") == b"\x00\xff"
    assert cache.get(b"absent") is None
    assert len(cache) == 3 and cache.size() == 3


def test_text_mode_decodes_keys_and_values(cache: weft.Cache[bytes]) -> None:
    # Proves a text handle returns str, shares the cache, and refuses values that are not UTF-8.
    text = cache.as_text()
    assert text.text and not cache.text
    text["greeting"] = "héllo"
    assert cache.get("greeting") == "héllo".encode()
    assert text.get("greeting") == "héllo"
    assert text.keys() == ["greeting"]
    assert text.items() == [("greeting", "héllo")]
    assert text.as_bytes().get("greeting") == "héllo".encode()
    cache.put(b"raw", b"\xff\xfe")
    with pytest.raises(UnicodeDecodeError):
        text.get(b"raw")


def test_conditional_writes_report_whether_they_applied(cache: weft.Cache[bytes]) -> None:
    # Proves put_if_absent, replace and remove answer True only when they changed the entry.
    assert cache.put_if_absent("k", "first") is True
    assert cache.put_if_absent("k", "second") is False
    assert cache.get("k") == b"first"
    assert cache.replace("k", "third") is True
    assert cache.replace("absent", "x") is False
    assert "absent" not in cache
    assert cache.get("k") == b"third"
    assert cache.remove("k") is True
    assert cache.remove("k") is False
    assert cache.contains("k") is False


def test_versioned_writes_apply_only_at_the_version_read(cache: weft.Cache[bytes]) -> None:
    # Proves compare-and-set: a stale version neither replaces nor removes.
    cache.put("k", "v1")
    found = cache.get_with_version("k")
    assert found is not None
    value, version = found
    assert value == b"v1"
    assert cache.replace_if_version("k", "v2", version) is True
    assert cache.replace_if_version("k", "v3", version) is False
    assert cache.get("k") == b"v2"
    assert cache.remove_if_version("k", version) is False
    current = cache.get_with_version("k")
    assert current is not None and current[1] != version
    assert cache.remove_if_version("k", current[1]) is True
    assert cache.get_with_version("k") is None


def test_mapping_protocol(cache: weft.Cache[bytes]) -> None:
    # Proves [], del, in, len and iteration behave as a dict's, KeyError included.
    cache["a"] = "1"
    cache[b"b"] = b"2"
    assert cache["a"] == b"1"
    assert "a" in cache and b"b" in cache and "c" not in cache
    assert sorted(cache) == [b"a", b"b"]
    with pytest.raises(KeyError):
        cache["c"]
    del cache["a"]
    with pytest.raises(KeyError):
        del cache["a"]
    assert len(cache) == 1


def test_bulk_operations_iteration_and_clear(cache: weft.Cache[bytes]) -> None:
    # Proves put_all/get_all over many keys (several segments), keys/items and clear.
    entries = {f"key-{i}": f"value-{i}" for i in range(500)}
    cache.put_all(entries)
    assert len(cache) == 500
    found = cache.get_all(["key-1", "key-499", "missing"])
    assert found == {b"key-1": b"value-1", b"key-499": b"value-499"}
    assert sorted(cache.keys()) == sorted(k.encode() for k in entries)
    assert dict(cache.items()) == {k.encode(): v.encode() for k, v in entries.items()}
    cache.clear()
    assert len(cache) == 0 and cache.keys() == []


def test_statistics_count_operations(cache: weft.Cache[bytes], manager: weft.CacheManager) -> None:
    # Proves stats() reports this cache's hits, misses, stores and removes.
    cache.put("k", "v")
    cache.get("k")
    cache.get("k")
    cache.get("absent")
    cache.remove("k")
    stats = cache.stats()
    assert stats["enabled"] is True
    assert (stats["hits"], stats["misses"], stats["stores"], stats["remove_hits"]) == (2, 1, 1, 1)
    assert manager.stats()["hits"] == 2


def test_caches_are_created_from_toml_and_mappings() -> None:
    # Proves both configuration forms reach the engine (a bound that refuses when full).
    toml = """
[caches.sessions]
memory = { max-count = 2, when-full = "exception" }
[caches.plain]
"""
    with weft.CacheManager(toml) as manager:
        assert manager.cache_names() == ["plain", "sessions"]
        sessions = manager.cache("sessions")
        sessions.put("a", "1")
        sessions.put("b", "2")
        with pytest.raises(weft.CacheFullError):
            sessions.put("c", "3")
    mapping = {"caches": {"orders": {"memory": {"max-count": 1, "when-full": "exception"}}}}
    with weft.CacheManager(mapping) as manager:
        orders = manager.cache("orders")
        orders.put("a", "1")
        with pytest.raises(weft.CacheFullError) as raised:
            orders.put("b", "2")
        assert isinstance(raised.value, weft.WeftError)


def test_create_and_remove_caches(manager: weft.CacheManager) -> None:
    # Proves the manager's lifecycle calls and the errors of each misuse.
    created = manager.create_cache("c1", {"segments": 16})
    created.put("k", "v")
    assert manager.cache("c1").get("k") == b"v"
    assert manager.cache_names() == ["c1", "default"]
    with pytest.raises(weft.CacheExistsError):
        manager.create_cache("c1")
    assert manager.remove_cache("c1") is True
    assert manager.remove_cache("c1") is False
    with pytest.raises(weft.CacheRemovedError):
        created.get("k")
    with pytest.raises(weft.CacheNotFoundError):
        manager.cache("c1")
    with pytest.raises(weft.ConfigError):
        manager.create_cache("bad/name")


def test_configuration_errors_name_line_and_column() -> None:
    # Proves a TOML mistake is a ConfigError that says where it is.
    with pytest.raises(weft.ConfigError, match=r"<config>:2:"):
        weft.CacheManager("[caches.a]\nsegmnts = 4\n")
    with pytest.raises(weft.ConfigError):
        weft.CacheManager({"caches": {"a": {"memory": {"max-count": "many"}}}})
    with pytest.raises(TypeError):
        weft.CacheManager(42)  # type: ignore[arg-type]


def test_argument_errors_are_type_and_value_errors(cache: weft.Cache[bytes]) -> None:
    # Proves wrong types and impossible durations are refused before reaching the cache.
    with pytest.raises(TypeError, match="bytes, bytearray or str"):
        cache.put(1, "v")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        cache.get(["k"])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        cache.put("k", "v", lifespan=0)
    with pytest.raises(ValueError):
        cache.put("k", "v", max_idle=-1.5)
    with pytest.raises(ValueError):
        cache.put("k", "v", lifespan=float("nan"))
    with pytest.raises(TypeError):
        cache.put("k", "v", lifespan="10s")  # type: ignore[arg-type]
    assert len(cache) == 0


def test_handle_attributes_and_generic_alias(cache: weft.Cache[bytes]) -> None:
    # Proves Cache[...] works at run time (annotations) and repr names the cache.
    assert weft.Cache[str] is not None
    assert repr(cache) == "<weft.Cache 'default' (local)>"
    assert cache.kind == "local" and cache.name == "default"
    assert cache.near_cache_stats() is None


def test_threads_share_a_cache(cache: weft.Cache[bytes]) -> None:
    # Proves concurrent writers through one handle lose nothing (the handle is thread-safe).
    def writer(thread: int) -> None:
        for i in range(200):
            cache.put(f"{thread}-{i}", str(i))

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive()
    assert len(cache) == 800
