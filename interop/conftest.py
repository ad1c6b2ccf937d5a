"""Shared fixtures: a release `weft server` on a free loopback port, stopped with SIGTERM
(and required to exit cleanly) at the end of the module."""

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WEFT_BIN = Path(os.environ.get("WEFT_BIN", ROOT / "target" / "release" / "weft"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"weft did not listen on {port} within {timeout_s}s")


@pytest.fixture(scope="module")
def weft_port(tmp_path_factory):
    """Port of a running server with caches `default` (db 0) and `second` (db 1)."""
    if not WEFT_BIN.exists():
        pytest.fail(f"{WEFT_BIN} missing: run `cargo build --release -p weft-server`")
    config = tmp_path_factory.mktemp("weft") / "weft.toml"
    config.write_text('[caches.default]\nresp-database = 0\n[caches.second]\nresp-database = 1\n')
    port = free_port()
    process = subprocess.Popen(
        [str(WEFT_BIN), "server", "--config", str(config), "--bind", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port)
        yield port
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
        output = process.stdout.read().decode(errors="replace") if process.stdout else ""
        assert code == 0, f"weft exited with {code} after SIGTERM:\n{output}"
        assert "panicked" not in output, output
