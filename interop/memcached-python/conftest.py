"""Fixtures of the memcached suites: a real memcached daemon next to the module's Weft, so that
every expectation is checked against memcached itself (MEMCACHED_BIN overrides the binary; a
missing one fails).

`server` is parametrized: each test that asks for it runs against the memcached daemon
(`on-memcached`), Weft's dedicated memcached port (`on-weft`, `memcached-listen`) and Weft's
shared port, where the protocol is detected from the first bytes (`on-weft-shared`).
`pytest -k on-memcached` runs the reference third alone, which proves the expectations
themselves without a Weft build."""

import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

# interop/ holds weft_process.py; pytest may import this file first when run from here.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from weft_process import free_port, start_weft, stop, stop_weft_cleanly, wait_for_port  # noqa: E402

MEMCACHED_BIN = os.environ.get("MEMCACHED_BIN") or shutil.which("memcached")


@dataclass(frozen=True)
class Target:
    """A server under test."""

    name: str
    port: int
    # Weft's shared port, where RESP reaches the same cache; None for memcached.
    resp_port: int | None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def is_weft(self) -> bool:
        return self.resp_port is not None


def start_memcached() -> tuple[subprocess.Popen, int]:
    """A memcached daemon on a free loopback port (TCP only, 64 MiB, default 1 MiB items)."""
    port = free_port()
    argv = [MEMCACHED_BIN, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-t", "2", "-m", "64"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        # memcached refuses to run as root without a user to switch to.
        argv += ["-u", "nobody"]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port, "memcached", process=process)
    return process, port


@pytest.fixture(scope="module")
def memcached_port():
    """Port of a memcached daemon started for the module."""
    if MEMCACHED_BIN is None:
        pytest.fail("memcached not installed (set MEMCACHED_BIN); apt-get install memcached")
    process, port = start_memcached()
    try:
        yield port
    finally:
        stop(process)


@pytest.fixture(scope="module")
def weft_ports(tmp_path_factory):
    """(shared port, memcached-listen port) of a Weft started for the module."""
    memcached = free_port()
    config = tmp_path_factory.mktemp("weft") / "weft.toml"
    config.write_text(f'[server]\nmemcached-listen = "127.0.0.1:{memcached}"\n')
    process, port = start_weft(config)
    try:
        wait_for_port(memcached, "weft memcached-listen", process=process)
        yield port, memcached
    finally:
        stop_weft_cleanly(process)


@pytest.fixture(
    scope="module",
    params=["memcached", "weft", "weft-shared"],
    ids=["on-memcached", "on-weft", "on-weft-shared"],
)
def server(request) -> Target:
    """The server under test: the daemon, then Weft's memcached port, then Weft's shared port."""
    if request.param == "memcached":
        return Target("memcached", request.getfixturevalue("memcached_port"), None)
    shared, dedicated = request.getfixturevalue("weft_ports")
    port = dedicated if request.param == "weft" else shared
    return Target(request.param, port, shared)


def text_exchange(port: int, request: bytes, reply_end: bytes = b"\r\n") -> bytes:
    """Sends raw text-protocol bytes on a fresh connection and reads until `reply_end`."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while not data.endswith(reply_end):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


@pytest.fixture(autouse=True)
def empty_server(request):
    """Every test that uses `server` starts from an empty cache."""
    if "server" in request.fixturenames:
        target = request.getfixturevalue("server")
        assert text_exchange(target.port, b"flush_all\r\n") == b"OK\r\n"
