"""libmemcached's conformance tool `memccapable` (Debian's name for `memcapable`, package
libmemcached-tools) against the memcached daemon and Weft: every ASCII and binary check must
pass. It flushes the server it tests."""

import os
import shutil
import subprocess

import pytest

MEMCCAPABLE_BIN = os.environ.get("MEMCCAPABLE_BIN") or shutil.which("memccapable") or shutil.which("memcapable")


@pytest.mark.parametrize("protocol", ["-a", "-b"], ids=["ascii", "binary"])
def test_memccapable_passes(server, protocol):
    # Proves every memccapable check of the protocol passes, as it does on memcached.
    if MEMCCAPABLE_BIN is None:
        pytest.skip("memccapable not installed: apt-get install libmemcached-tools")
    result = subprocess.run(
        [MEMCCAPABLE_BIN, "-h", "127.0.0.1", "-p", str(server.port), "-t", "10", protocol],
        capture_output=True, text=True, timeout=120, check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "All tests passed" in output, output
    assert "[fail]" not in output, output
