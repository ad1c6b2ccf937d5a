"""Helpers the test files share."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import pytest


def eventually(condition: Callable[[], bool], timeout_s: float = 10.0, what: str = "") -> None:
    """Polls `condition` every 20 ms until it holds; fails the test after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout_s} s: {what}")
        time.sleep(0.02)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
