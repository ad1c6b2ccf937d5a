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


USER, PASSWORD = "app", "interop-password-1"
# A user in group observer: it may read, not write.
VIEWER = "viewer"


@pytest.fixture(scope="module")
def weft_auth_port(tls_files):
    """A server with TLS and a users file holding USER (group application) and VIEWER
    (group observer), both with PASSWORD."""
    import os
    import subprocess

    from weft_process import WEFT_BIN

    users = tls_files / "users.toml"
    if not users.exists():
        for name, group in ((USER, "application"), (VIEWER, "observer")):
            subprocess.run([str(WEFT_BIN), "user", "create", name, "--groups", group,
                            "--users-file", str(users)], check=True, capture_output=True,
                           env=dict(os.environ, WEFT_USER_PASSWORD=PASSWORD))
    config = tls_files / "weft-auth.toml"
    config.write_text((tls_files / "weft.toml").read_text()
                      + '[security]\nusers-file = "users.toml"\n')
    process, port = start_weft(config)
    try:
        yield port
    finally:
        stop_weft_cleanly(process)
