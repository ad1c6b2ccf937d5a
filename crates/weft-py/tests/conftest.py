"""Fixtures of the `weft` module's suite: local managers, free loopback ports, and a release
`weft server` from $WEFT_BIN (started and stopped as the interop suites do it)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import weft

ROOT = Path(__file__).resolve().parents[3]
# One way to start and stop a server for every Python suite: interop/weft_process.py.
sys.path.insert(0, str(ROOT / "interop"))


@pytest.fixture
def manager() -> Iterator[weft.CacheManager]:
    """A manager with its one cache, `default`."""
    with weft.CacheManager() as manager:
        yield manager


@pytest.fixture
def cache(manager: weft.CacheManager) -> weft.Cache[bytes]:
    return manager.cache("default")


@pytest.fixture(scope="module")
def weft_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The Hot Rod port of a release server with caches `default` and `other`."""
    if not os.environ.get("WEFT_BIN"):
        pytest.skip("WEFT_BIN is not set: build `cargo build --release -p weft-server` and "
                    "export WEFT_BIN=target/release/weft to run the client's tests")
    from weft_process import start_weft, stop_weft_cleanly

    config = tmp_path_factory.mktemp("weft") / "weft.toml"
    config.write_text("[caches.default]\n[caches.other]\n")
    process, port = start_weft(config)
    try:
        yield port
    finally:
        stop_weft_cleanly(process)
