"""A release weft server with TLS on its port (and plaintext beside it), client certificates
optional and checked against the test CA; the certificates come from interop/tls_files.py."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tls_files import make  # noqa: E402
from weft_process import start_weft, stop_weft_cleanly  # noqa: E402


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    return make(tmp_path_factory.mktemp("tls"), client_ca=True).parent


@pytest.fixture(scope="module")
def weft_tls_port(tls_files):
    process, port = start_weft(tls_files / "weft.toml")
    try:
        yield port
    finally:
        stop_weft_cleanly(process)
