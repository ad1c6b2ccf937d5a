"""Fixtures of the RESP suites: a real redis-server next to the module's Weft, so that the same
expectations run on Redis first (REDIS_SERVER_BIN overrides the binary; a missing one fails).

`server` is parametrized: each test that asks for it runs once against redis-server (`on-redis`)
and once against Weft (`on-weft`); `pytest -k on-redis` runs the reference half alone, which
proves the expectations themselves without a Weft build."""

import sys
from pathlib import Path

import pytest

# interop/ holds weft_process.py (and the conftest with `weft_port`); pytest may import this
# file first when run from this directory.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from differential import REDIS_SERVER_BIN, start_redis  # noqa: E402
from weft_process import stop  # noqa: E402


@pytest.fixture(scope="module")
def redis_port():
    """Port of a redis-server started for the module."""
    if REDIS_SERVER_BIN is None:
        pytest.fail("redis-server not installed (set REDIS_SERVER_BIN); .ci/run installs it")
    process, port = start_redis()
    try:
        yield port
    finally:
        stop(process)


@pytest.fixture(scope="module", params=["redis", "weft"], ids=["on-redis", "on-weft"])
def server(request) -> int:
    """Port of the server under test: the module's redis-server, then the module's Weft."""
    return request.getfixturevalue("redis_port" if request.param == "redis" else "weft_port")
