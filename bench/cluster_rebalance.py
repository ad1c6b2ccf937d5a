#!/usr/bin/env python3
"""Rebalancing a loaded cluster: three release nodes (a distributed cache, owners = 2) hold
--entries entries; a fourth node joins. Measures how long the rebalance takes (until every
node has installed the stable topology with four members), the bytes the nodes sent each
other meanwhile (weft_cluster_bytes_total), and the latency of writes issued one at a time
during it (the issue's bar: no write blocked for more than 100 ms).

    cargo build --release -p weft-server && python3 bench/cluster_rebalance.py --entries 1000000

Loading routes each key to its primary owner (Infinispan's MurmurHash3 variant, computed here,
and the owners from GET /rest/v2/cluster/topology), in pipelines of 1,000 SETs per node, so no
load request is forwarded. The probe writes to random keys through random nodes (forwarding
included), one at a time, from a separate thread. Prints a Markdown summary; --json saves it.
Every loop is bounded in count and time.
"""

import argparse
import json
import random
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "interop"))

from weft_process import WEFT_BIN, stop, wait_for_port  # noqa: E402
from with_weft_cluster import free_port, free_udp_and_tcp_port  # noqa: E402

MASK = (1 << 64) - 1


def rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & MASK


def fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & MASK
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & MASK
    k ^= k >> 33
    return k


def murmur3_infinispan(data: bytes, seed: int = 9001) -> int:
    """Infinispan's MurmurHash3 variant (docs: protocols.md 2.5): the top 32 bits of h1."""
    h1 = (0x9368E53C2F6AF274 ^ seed) & MASK
    h2 = (0x586DCD208F7CD3FD ^ seed) & MASK
    c1, c2 = 0x87C37B91114253D5, 0x4CF5AD432745937F

    def bmix(h1, h2, k1, k2, c1, c2):
        k1 = (k1 * c1) & MASK
        k1 = rotl(k1, 23)
        k1 = (k1 * c2) & MASK
        h1 ^= k1
        h1 = (h1 + h2) & MASK
        h2 = rotl(h2, 41)
        k2 = (k2 * c2) & MASK
        k2 = rotl(k2, 23)
        k2 = (k2 * c1) & MASK
        h2 ^= k2
        h2 = (h2 + h1) & MASK
        h1 = (h1 * 3 + 0x52DCE729) & MASK
        h2 = (h2 * 3 + 0x38495AB5) & MASK
        c1 = (c1 * 5 + 0x7B7D159C) & MASK
        c2 = (c2 * 5 + 0x6BCE6396) & MASK
        return h1, h2, c1, c2

    length = len(data)
    blocks = length // 16
    for i in range(blocks):
        k1, k2 = struct.unpack_from("<QQ", data, i * 16)
        h1, h2, c1, c2 = bmix(h1, h2, k1, k2, c1, c2)
    tail = data[blocks * 16:]
    if tail:
        k1 = k2 = 0
        # Each tail byte sign-extended (a Java quirk), shifted to its place in k1 or k2.
        for j, byte in enumerate(tail):
            extended = (byte - 256 if byte >= 128 else byte) & MASK
            shifted = (extended << (8 * (j % 8))) & MASK
            if j >= 8:
                k2 ^= shifted
            else:
                k1 ^= shifted
        h1, h2, c1, c2 = bmix(h1, h2, k1, k2, c1, c2)
    h2 ^= length
    h1 = (h1 + h2) & MASK
    h2 = (h2 + h1) & MASK
    h1 = fmix(h1)
    h2 = fmix(h2)
    h1 = (h1 + h2) & MASK
    h2 = (h2 + h1) & MASK
    h = h1 >> 32
    return h - (1 << 32) if h >= (1 << 31) else h


# Infinispan's own vectors (protocols.md 2.5): a wrong hash would misroute every load request.
VECTORS = [("", 89125410), ("61", -1119243492), ("6b657931", -1758694083),
           ("3031323334353637383961626364656658", 166285569),
           ("80ff7f900102030405060708090a0b0c0d0efe", 1865355805), ("4a046b657931", -1178833119)]


def segment_of(key: bytes, segments: int) -> int:
    size = -(-(1 << 31) // segments)
    return (murmur3_infinispan(key) & 0x7FFFFFFF) // size


def topology(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/rest/v2/cluster/topology", timeout=10) as r:
        return json.load(r)


def cluster_bytes(ports: list[int]) -> int:
    total = 0
    for port in ports:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith('weft_cluster_bytes_total{direction="sent"}'):
                    total += int(float(line.split()[-1]))
    return total


def stable(ports: list[int], members: int) -> bool:
    try:
        for port in ports:
            caches = topology(port)["caches"]
            if not caches or any(c["phase"] != "stable" or len(c["members"]) != members for c in caches):
                return False
        return True
    except OSError:
        return False


def resp_command(*args: bytes) -> bytes:
    out = b"*%d\r\n" % len(args)
    for arg in args:
        out += b"$%d\r\n%s\r\n" % (len(arg), arg)
    return out


def read_replies(sock: socket.socket, count: int, buffer: bytearray) -> None:
    """Reads `count` simple replies (+OK or -ERR lines)."""
    seen = 0
    while seen < count:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("closed")
        buffer.extend(chunk)
        while True:
            end = buffer.find(b"\r\n")
            if end < 0:
                break
            line = bytes(buffer[:end])
            del buffer[:end + 2]
            if line.startswith(b"-"):
                raise RuntimeError(line.decode())
            seen += 1


def start_node(i: int, port: int, cluster_port: int, seeds: str, config: Path) -> subprocess.Popen:
    argv = [str(WEFT_BIN), "server", "--config", str(config), "--bind", f"127.0.0.1:{port}",
            "--cluster-listen", f"127.0.0.1:{cluster_port}", "--node-name", f"node-{i}", "--join", seeds]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait(what: str, timeout_s: float, cond) -> float:
    start = time.monotonic()
    while not cond():
        if time.monotonic() - start > timeout_s:
            raise TimeoutError(what)
        time.sleep(0.05)
    return time.monotonic() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--segments", type=int, default=256)
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    for data, expected in VECTORS:
        assert murmur3_infinispan(bytes.fromhex(data)) == expected, data
    if not WEFT_BIN.exists():
        sys.exit(f"{WEFT_BIN} missing: cargo build --release -p weft-server")
    work = Path(tempfile.mkdtemp(prefix="weft-rebalance-"))
    config = work / "weft.toml"
    config.write_text(f'[caches.default]\nmode = "distributed"\nowners = 2\nsegments = {options.segments}\n')
    ports = [free_port() for _ in range(4)]
    cluster_ports = [free_udp_and_tcp_port() for _ in range(4)]
    seeds = ",".join(f"127.0.0.1:{p}" for p in cluster_ports)
    processes = []
    result = {"entries": options.entries, "value_bytes": options.value_bytes, "segments": options.segments}
    try:
        for i in range(3):
            processes.append(start_node(i, ports[i], cluster_ports[i], seeds, config))
        for i in range(3):
            wait_for_port(ports[i], process=processes[i])
        wait("three nodes", 60, lambda: stable(ports[:3], 3))

        # Load: each key straight to its primary.
        report = topology(ports[0])
        owners = report["caches"][0]["owners"]
        by_name = {f"node-{i}": ports[i] for i in range(3)}
        value = b"v" * options.value_bytes
        sockets = {name: socket.create_connection(("127.0.0.1", port)) for name, port in by_name.items()}
        batches: dict[str, list[bytes]] = {name: [] for name in by_name}
        buffers = {name: bytearray() for name in by_name}
        started = time.monotonic()
        for n in range(options.entries):
            key = b"key:%d" % n
            primary = owners[segment_of(key, options.segments)][0]
            batches[primary].append(resp_command(b"SET", key, value))
            if len(batches[primary]) == 1000:
                sockets[primary].sendall(b"".join(batches[primary]))
                read_replies(sockets[primary], 1000, buffers[primary])
                batches[primary].clear()
        for name, batch in batches.items():
            if batch:
                sockets[name].sendall(b"".join(batch))
                read_replies(sockets[name], len(batch), buffers[name])
        result["load_seconds"] = round(time.monotonic() - started, 2)
        print(f"loaded {options.entries} entries in {result['load_seconds']} s", file=sys.stderr)

        # The probe: one write at a time through random nodes, until told to stop.
        latencies: list[float] = []
        stop_probe = threading.Event()

        def probe() -> None:
            rng = random.Random(7)
            conns = [socket.create_connection(("127.0.0.1", p)) for p in ports[:3]]
            buffer = bytearray()
            deadline = time.monotonic() + 600
            while not stop_probe.is_set() and time.monotonic() < deadline:
                sock = rng.choice(conns)
                key = b"probe:%d" % rng.randrange(100_000)
                begin = time.monotonic()
                sock.sendall(resp_command(b"SET", key, b"x"))
                read_replies(sock, 1, buffer)
                buffer.clear()
                latencies.append(time.monotonic() - begin)

        bytes_before = cluster_bytes(ports[:3])
        thread = threading.Thread(target=probe, daemon=True)
        thread.start()
        time.sleep(1.0)
        baseline = len(latencies)
        joined_at = time.monotonic()
        processes.append(start_node(3, ports[3], cluster_ports[3], seeds, config))
        wait_for_port(ports[3], process=processes[3])
        took = wait("the rebalance", 900, lambda: stable(ports, 4))
        result["rebalance_seconds"] = round(time.monotonic() - joined_at, 2)
        during = latencies[baseline:]
        stop_probe.set()
        thread.join(timeout=30)
        result["cluster_bytes_sent"] = cluster_bytes(ports) - bytes_before
        result["probe_writes_during"] = len(during)
        if during:
            ordered = sorted(during)
            result["write_p50_ms"] = round(ordered[len(ordered) // 2] * 1000, 2)
            result["write_p99_ms"] = round(ordered[int(len(ordered) * 0.99)] * 1000, 2)
            result["write_max_ms"] = round(ordered[-1] * 1000, 2)
        sizes = []
        for port in ports:
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.sendall(resp_command(b"DBSIZE"))
                sizes.append(int(sock.recv(100).strip()[1:]))
        result["dbsize_per_node"] = sizes
        del took
    finally:
        for process in processes:
            stop(process)
    print("| entries | rebalance | bytes sent between nodes | writes during | p50 | p99 | max |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {result['entries']:,} x {result['value_bytes']} B | {result.get('rebalance_seconds')} s "
          f"| {result.get('cluster_bytes_sent', 0) / 1e6:.1f} MB | {result.get('probe_writes_during')} "
          f"| {result.get('write_p50_ms')} ms | {result.get('write_p99_ms')} ms | {result.get('write_max_ms')} ms |")
    if options.json:
        options.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
