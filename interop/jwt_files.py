#!/usr/bin/env python3
"""A stand-in OpenID provider for the interop suites: an ES256 signing key, the JWKS document
that publishes it (DIR/jwks.json, what `[security.jwt] jwks-file` reads), and tokens it signs.

    python3 interop/jwt_files.py DIR USER GROUP[,GROUP...] [--expires-in SECONDS]

Writes DIR/jwks.json and DIR/jwt.key (once; later calls reuse the key) and prints a token for
USER with GROUPs in its `groups` claim, issued by https://idp.interop for audience `weft`.
"""

import argparse
import json
import time
from pathlib import Path

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

ISSUER, AUDIENCE, KID = "https://idp.interop", "weft", "interop-1"


def key(dir_: Path) -> ec.EllipticCurvePrivateKey:
    path = dir_ / "jwt.key"
    if path.exists():
        return serialization.load_pem_private_key(path.read_bytes(), password=None)
    private = ec.generate_private_key(ec.SECP256R1())
    path.write_bytes(private.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    path.chmod(0o600)
    public = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(private.public_key()))
    public.update({"kid": KID, "use": "sig", "alg": "ES256"})
    (dir_ / "jwks.json").write_text(json.dumps({"keys": [public]}))
    return private


def token(dir_: Path, user: str, groups: list[str], expires_in: int = 600) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + expires_in,
              "preferred_username": user, "groups": groups}
    return jwt.encode(claims, key(dir_), algorithm="ES256", headers={"kid": KID})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("user")
    parser.add_argument("groups")
    parser.add_argument("--expires-in", type=int, default=600)
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    print(token(args.dir, args.user, args.groups.split(","), args.expires_in))


if __name__ == "__main__":
    main()
