#!/usr/bin/env python3
"""Test certificates for the TLS interop suites, made with the `openssl` command: a CA, a server
certificate for `localhost` and 127.0.0.1 signed by it, a client certificate it signed, and a
client certificate another CA signed. Also writes a weft configuration serving them.

    python3 interop/tls_files.py DIR [--client-ca]

Prints DIR/weft.toml's path. Files: ca.pem, server.pem, server.key, client.pem, client.key,
stranger.pem, stranger.key (the other CA's client), weft.toml.
"""

import subprocess
import sys
from pathlib import Path


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(dir_: Path, name: str, cn: str) -> None:
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={cn}",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=dir_)


def sign(dir_: Path, ca: str, name: str, cn: str, extensions: str) -> None:
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}", cwd=dir_)
    (dir_ / f"{name}.ext").write_text(extensions)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext",
            cwd=dir_)


def make(dir_: Path, client_ca: bool = False) -> Path:
    """Writes the files into `dir_`; returns the weft configuration's path."""
    dir_.mkdir(parents=True, exist_ok=True)
    make_ca(dir_, "ca", "Weft interop CA")
    make_ca(dir_, "other-ca", "Someone else's CA")
    sign(dir_, "ca", "server", "localhost",
         "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    sign(dir_, "ca", "client", "app", "extendedKeyUsage=clientAuth\n")
    sign(dir_, "other-ca", "stranger", "app", "extendedKeyUsage=clientAuth\n")
    config = dir_ / "weft.toml"
    lines = ["[server.tls]", 'certificate = "server.pem"', 'key = "server.key"']
    if client_ca:
        lines += ['client-ca = "ca.pem"', 'client-auth = "optional"']
    config.write_text("\n".join(lines) + "\n")
    return config


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print(make(Path(sys.argv[1]), "--client-ca" in sys.argv[2:]))
