#!/usr/bin/env bash
# Runs the Hot Rod Java interop suite against a release weft server (target/release/weft, or
# $WEFT_BIN), once per client: 15.0.x, then the rewritten 15.2.x. Builds no Rust. Stops at the
# first failing profile. Extra arguments go to mvn (e.g. -Dtest=ListenerTest); each profile
# compiles from clean, since the two clients differ.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

for profile in client-15.0 client-15.2; do
  echo "=== Hot Rod Java interop, profile $profile"
  # Debian's Maven 3.8 prints stray ESC[0m codes even with -B -q; strip them.
  status=0
  python3 "$here/../with_weft.py" --config "$here/weft.toml" -- \
    mvn -q -B -Dstyle.color=never -P"$profile" -Dweft.port={port} "$@" clean test \
    2>&1 | sed -u 's/\x1b\[[0-9;]*m//g' || status=$?
  python3 - "$here/target/surefire-reports" "$profile" <<'PY'
import sys, pathlib, xml.etree.ElementTree as ET
totals = [0, 0, 0, 0]
for report in sorted(pathlib.Path(sys.argv[1]).glob("TEST-*.xml")):
    suite = ET.parse(report).getroot()
    for i, name in enumerate(("tests", "failures", "errors", "skipped")):
        totals[i] += int(suite.get(name, 0))
print(f"{sys.argv[2]}: {totals[0]} tests, {totals[1]} failures, {totals[2]} errors, {totals[3]} skipped")
PY
  if [ "$status" -ne 0 ]; then
    echo "Hot Rod Java interop failed with profile $profile (exit $status)"
    exit "$status"
  fi
done

# Both clients over TLS and with SASL (SCRAM, PLAIN), on a server whose port serves TLS and
# plaintext (TlsTest is skipped by the runs above, which set no WEFT_TLS_DIR).
tls_dir="$(mktemp -d)"
trap 'rm -rf "$tls_dir"' EXIT
tls_config="$(python3 "$here/../tls_files.py" "$tls_dir" --client-ca)"
# Users for the clients to authenticate as, in a users file the server reads.
weft_bin="${WEFT_BIN:-$here/../../target/release/weft}"
tls_password="interop-$RANDOM-$RANDOM"
WEFT_USER_PASSWORD="$tls_password" "$weft_bin" user create app --groups application \
  --users-file "$tls_dir/users.toml" >/dev/null
# And one that may only read (the observer role).
WEFT_USER_PASSWORD="$tls_password" "$weft_bin" user create viewer --groups observer \
  --users-file "$tls_dir/users.toml" >/dev/null
printf '[security]\nusers-file = "users.toml"\n' >> "$tls_config"
# Bearer tokens from a stand-in OpenID provider, for SASL OAUTHBEARER.
tls_token="$(python3 "$here/../jwt_files.py" "$tls_dir" app application)"
printf '[security.jwt]\njwks-file = "jwks.json"\nissuer = "https://idp.interop"\naudience = "weft"\n' >> "$tls_config"
for profile in client-15.0 client-15.2; do
  echo "=== Hot Rod Java interop over TLS, profile $profile"
  status=0
  WEFT_TLS_DIR="$tls_dir" WEFT_PASSWORD="$tls_password" WEFT_TOKEN="$tls_token" python3 "$here/../with_weft.py" --config "$tls_config" -- \
    mvn -q -B -Dstyle.color=never -P"$profile" -Dweft.port={port} -Dtest=TlsTest \
    -Dsurefire.failIfNoSpecifiedTests=false clean test \
    >"$tls_dir/mvn-$profile.log" 2>&1 || status=$?
  # The refusals the tests provoke fill the client's log with stack traces: shown on failure.
  if [ "$status" -ne 0 ]; then
    sed 's/\x1b\[[0-9;]*m//g' "$tls_dir/mvn-$profile.log" | tail -150
    echo "Hot Rod Java TLS interop failed with profile $profile (exit $status)"
    exit "$status"
  fi
  grep -ho 'tests="[0-9]*" errors="[0-9]*" skipped="[0-9]*" failures="[0-9]*"' \
    "$here"/target/surefire-reports/TEST-*.xml | sed "s/^/$profile over TLS: /"
done

# The official client against a three-node cluster (both classes are skipped by the
# single-server runs above): near caches and client listeners on one node seeing the writes
# made through another (ClusterNearCacheTest), then primary-owner routing and a node killed
# with SIGKILL mid-run (ClusterTest). Two Maven runs on one cluster, so that the kill comes last.
echo "=== Hot Rod Java interop against a 3-node cluster, profile client-15.2"
status=0
mvn_cluster="mvn -q -B -Dstyle.color=never -Pclient-15.2 -Dsurefire.failIfNoSpecifiedTests=false"
python3 "$here/../with_weft_cluster.py" --nodes 3 --config "$here/cluster.toml" -- \
  bash -c "$mvn_cluster -Dtest=ClusterNearCacheTest clean test && $mvn_cluster -Dtest=ClusterTest test" \
  2>&1 | sed -u 's/\x1b\[[0-9;]*m//g' || status=$?
if [ "$status" -ne 0 ]; then
  echo "Hot Rod Java cluster interop failed (exit $status)"
  exit "$status"
fi
