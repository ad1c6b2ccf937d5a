#!/usr/bin/env python3
"""RESP throughput of a three-node cluster (a distributed cache, owners = 2, sync replication,
Redis slots as segments) against one node, in the same run on the same machine:
redis-benchmark SET and GET, 50 clients, pipeline 1 and 16, `--cluster` against the cluster
(the client routes each key to its slot's master, as any Redis cluster client does).

    cargo build --release -p weft-server && python3 bench/cluster_vs_single.py

All processes share the machine's cores: the cluster does three times the server work per
write (a primary and a backup apply it, and every write crosses a socket), so on a small
machine the ratio shows the price of replication more than the gain of more nodes. Prints a
Markdown table of requests per second and the ratio cluster / single; --json saves it.
"""

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "interop"))

from weft_process import WEFT_BIN, stop, wait_for_port  # noqa: E402
from with_weft_cluster import free_port, launch_nodes, wait_ready  # noqa: E402

CACHE = """
[caches.default]
mode = "distributed"
owners = 2
segments = 256
key-partitioner = "redis-slots"
"""


def benchmark(port: int, tests: str, pipeline: int, requests: int, cluster: bool) -> dict[str, float]:
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", tests, "-c", "50",
            "-P", str(pipeline), "-n", str(requests), "-r", "100000", "-d", "100", "-q"]
    if cluster:
        argv.append("--cluster")
    output = subprocess.run(argv, capture_output=True, text=True, timeout=600).stdout
    rates = {}
    for line in output.replace("\r", "\n").splitlines():
        match = re.match(r"^(SET|GET): ([0-9.]+) requests per second", line.strip())
        if match:
            rates[match.group(1)] = float(match.group(2))
    return rates


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    if not WEFT_BIN.exists():
        sys.exit(f"{WEFT_BIN} missing: cargo build --release -p weft-server")
    work = Path(tempfile.mkdtemp(prefix="weft-cluster-bench-"))
    config = work / "weft.toml"
    config.write_text(CACHE)
    results: dict[str, dict[str, float]] = {}

    # One node: the same cache, a cluster of one.
    port = free_port()
    single = subprocess.Popen([str(WEFT_BIN), "server", "--config", str(config), "--bind", f"127.0.0.1:{port}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, process=single)
        for pipeline in (1, 16):
            results[f"single P{pipeline}"] = benchmark(port, "set,get", pipeline, options.requests, False)
    finally:
        stop(single)

    ports, nodes = launch_nodes(3, config)
    try:
        wait_ready(ports, nodes)
        for pipeline in (1, 16):
            results[f"cluster P{pipeline}"] = benchmark(ports[0], "set,get", pipeline, options.requests, True)
    finally:
        for process in nodes:
            stop(process)

    print("| test | pipeline | one node (req/s) | 3 nodes, owners = 2 (req/s) | ratio |")
    print("|---|---|---|---|---|")
    for pipeline in (1, 16):
        for test in ("SET", "GET"):
            one = results[f"single P{pipeline}"].get(test, 0.0)
            three = results[f"cluster P{pipeline}"].get(test, 0.0)
            ratio = three / one if one else 0.0
            print(f"| {test} | {pipeline} | {one:,.0f} | {three:,.0f} | {ratio:.2f}x |")
    if options.json:
        options.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
