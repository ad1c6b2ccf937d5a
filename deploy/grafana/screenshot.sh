#!/usr/bin/env bash
# Makes docs/images/weft-dashboard.png from real data: three `weft server` nodes on
# loopback, a Prometheus scraping their /metrics every 2 s, a bounded mixed load (RESP,
# memcached, HTTP) through every node for DURATION seconds with one node killed
# two-thirds of the way, then deploy/grafana/render.py draws the dashboard's panels from
# Prometheus. Needs `prometheus` (Debian package) and matplotlib (pip).
#   WEFT_BIN=target/release/weft bash deploy/grafana/screenshot.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
WEFT_BIN=$(realpath "${WEFT_BIN:?set WEFT_BIN to a built weft}")
DURATION=${DURATION:-180}
OUT=${OUT:-docs/images/weft-dashboard.png}
scratch=$(mktemp -d /tmp/weft-dashboard.XXXXXX)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$scratch"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

cat >"$scratch/weft.toml" <<'TOML'
[caches.default]
mode = "distributed"
owners = 2
TOML
clients=(); clusters=(); names=(a b c)
for _ in 0 1 2; do clients+=("$(free_port)"); clusters+=("$(free_port)"); done
join="127.0.0.1:${clusters[0]},127.0.0.1:${clusters[1]},127.0.0.1:${clusters[2]}"
for i in 0 1 2; do
  (cd "$scratch" && exec "$WEFT_BIN" server --config weft.toml --bind "127.0.0.1:${clients[$i]}" \
    --cluster-listen "127.0.0.1:${clusters[$i]}" --node-name "${names[$i]}" --join "$join" \
    >"${names[$i]}.log" 2>&1) &
  pids+=($!)
done
victim=${pids[2]}
prometheus_port=$(free_port)
cat >"$scratch/prometheus.yml" <<YAML
global: {scrape_interval: 2s, evaluation_interval: 2s}
scrape_configs:
  - job_name: weft
    static_configs:
      - targets: ["127.0.0.1:${clients[0]}", "127.0.0.1:${clients[1]}", "127.0.0.1:${clients[2]}"]
YAML
prometheus --config.file="$scratch/prometheus.yml" --storage.tsdb.path="$scratch/tsdb" \
  --web.listen-address="127.0.0.1:$prometheus_port" >"$scratch/prometheus.log" 2>&1 &
pids+=($!)
python3 - "$DURATION" "$victim" "${clients[@]}" <<'PY'
import os, signal, socket, sys, time, urllib.request
duration, victim, ports = float(sys.argv[1]), int(sys.argv[2]), [int(p) for p in sys.argv[3:]]
deadline = time.monotonic() + 60
while True:  # the cluster forms
    try:
        report = urllib.request.urlopen(f"http://127.0.0.1:{ports[0]}/rest/v2/cluster/topology", timeout=2).read()
        if report.count(b'"stable"') and b'"c"' in report:
            break
    except OSError:
        pass
    if time.monotonic() > deadline:
        sys.exit("the cluster did not form")
    time.sleep(0.5)
def call(port, payload, until):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(payload)
        seen = b""
        while until not in seen:
            chunk = s.recv(65536)
            if not chunk:
                break
            seen += chunk
start = time.monotonic()
killed = False
operations = 0
while time.monotonic() - start < duration and operations < 2_000_000:
    elapsed = time.monotonic() - start
    if not killed and elapsed > duration * 2 / 3:
        os.kill(victim, signal.SIGKILL)
        killed = True
        ports = ports[:2]
    # Busier in the middle third, so that rates and latencies move.
    batch = 40 if duration / 3 < elapsed < duration * 2 / 3 else 15
    for port in ports:
        try:
            keys = [f"key{(operations + i) % 5000}" for i in range(batch)]
            call(port, b"".join(f"set {k} 0 0 5\r\nvalue\r\n".encode() for k in keys), b"STORED\r\n" * 1 if batch == 1 else f"STORED\r\n".encode())
            call(port, b"".join(f"get {k}\r\n".encode() for k in keys), b"END\r\n")
            call(port, b"".join(f"*2\r\n$3\r\nGET\r\n${len(k)}\r\n{k}\r\n".encode() for k in keys), b"\r\n")
            body = b"v" * 64
            call(port, f"PUT /rest/v2/caches/default/h{operations % 500} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body, b"HTTP/1.1")
            call(port, f"GET /rest/v2/caches/default/h{operations % 500} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode(), b"HTTP/1.1")
            operations += 3 * batch + 2
        except OSError:
            pass
    time.sleep(0.05)
print(f"load: {operations} operations in {time.monotonic() - start:.0f} s")
PY
sleep 6
mkdir -p "$(dirname "$OUT")"
python3 deploy/grafana/render.py deploy/grafana/weft-dashboard.json \
  --prometheus "http://127.0.0.1:$prometheus_port" --minutes "$(python3 -c "print(($DURATION + 30) / 60)")" --out "$OUT"
