"""Shared fixtures: a release `weft server` on a free loopback port, stopped with SIGTERM
(and required to exit cleanly) at the end of the module."""

import pytest

from weft_process import start_weft, stop_weft_cleanly


@pytest.fixture(scope="module")
def weft_port(tmp_path_factory):
    """Port of a running server with caches `default` (db 0) and `second` (db 1)."""
    config = tmp_path_factory.mktemp("weft") / "weft.toml"
    config.write_text('[caches.default]\nresp-database = 0\n[caches.second]\nresp-database = 1\n')
    process, port = start_weft(config)
    try:
        yield port
    finally:
        stop_weft_cleanly(process)
