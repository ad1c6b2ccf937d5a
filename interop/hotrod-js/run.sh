#!/usr/bin/env bash
# Runs the Node.js Hot Rod interop suite: installs the pinned `infinispan` client from the lock
# file (from npm's cache when it has it), then runs every test file, one file at a time, against
# a release weft that ../with_weft.py starts on a free port with weft.toml (it sets WEFT_PORT).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
if [ -f package-lock.json ]; then
  npm ci --silent --prefer-offline --no-audit --no-fund
else
  npm install --silent --no-audit --no-fund
fi
# One file at a time: the files share one server, and some tests clear or count a whole cache.
# --test-force-exit: a server that leaves a socket open must not keep the run alive.
python3 ../with_weft.py --config "$here/weft.toml" -- \
  node --test --test-concurrency=1 --test-force-exit

# Authentication (SCRAM, PLAIN over TLS) against a server with a users file and TLS.
tls_dir="$(mktemp -d)"
trap 'rm -rf "$tls_dir"' EXIT
tls_config="$(python3 ../tls_files.py "$tls_dir")"
weft_bin="${WEFT_BIN:-$here/../../target/release/weft}"
password="interop-$RANDOM-$RANDOM"
WEFT_USER_PASSWORD="$password" "$weft_bin" user create app --groups application \
  --users-file "$tls_dir/users.toml" >/dev/null
printf '[security]\nusers-file = "users.toml"\n' >> "$tls_config"
WEFT_TLS_DIR="$tls_dir" WEFT_PASSWORD="$password" python3 ../with_weft.py --config "$tls_config" -- \
  node --test --test-concurrency=1 --test-force-exit auth/auth-suite.js
