#!/usr/bin/env python3
"""RESP throughput of a three-node cluster against one node, in the same run on the same
machine, with the servers' CPU time per request (from /proc):

* a distributed cache (owners = 2, sync replication, Redis slots as segments): redis-benchmark
  SET and GET, 50 clients, pipeline 1 and 16, `--cluster` against the cluster (the client
  routes each key to its slot's master, as any Redis cluster client does);
* a replicated cache: GET at pipeline 16 through every node at once (three redis-benchmark
  processes, one per node, 16 clients each; every node holds every key and reads locally),
  against one node with 48 clients.

    cargo build --release -p weft-server && python3 bench/cluster_vs_single.py

All processes share the machine's cores: the cluster does more server work per write (a
primary and a backup apply it, and every write crosses a socket), so on a small machine the
ratio shows the price of replication more than the gain of more nodes. Prints Markdown
tables of requests per second, the ratio cluster / single, and server CPU µs per request;
--json saves the numbers.
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
from common import cpu_seconds  # noqa: E402

DISTRIBUTED = """
[caches.default]
mode = "distributed"
owners = 2
segments = 256
key-partitioner = "redis-slots"
"""

REPLICATED = """
[caches.default]
mode = "replicated"
segments = 256
key-partitioner = "redis-slots"
"""




def argv(port: int, test: str, pipeline: int, requests: int, clients: int, cluster: bool) -> list[str]:
    args = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", test, "-c", str(clients),
            "-P", str(pipeline), "-n", str(requests), "-r", "100000", "-d", "100", "-q"]
    if cluster:
        args.append("--cluster")
    return args


def measured(pids: list[int], requests: int, runs: list[list[str]]) -> tuple[float, float]:
    """Runs the redis-benchmark invocations `runs` at once; their summed rate and the
    servers' CPU µs per request."""
    before = cpu_seconds(pids)
    processes = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                 for args in runs]
    rate = 0.0
    for process in processes:
        output, _ = process.communicate(timeout=600)
        for line in output.replace("\r", "\n").splitlines():
            match = re.match(r"^(SET|GET): ([0-9.]+) requests per second", line.strip())
            if match:
                rate += float(match.group(2))
    used = cpu_seconds(pids) - before
    return rate, used / requests * 1e6


def single_node(config: Path, work) -> tuple[int, subprocess.Popen]:
    port = free_port()
    process = subprocess.Popen([str(WEFT_BIN), "server", "--config", str(config), "--bind", f"127.0.0.1:{port}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work)
    wait_for_port(port, process=process)
    return port, process


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200_000,
                        help="requests per run at pipeline 1; ten times as many at pipeline 16, "
                             "so that no run is over before the clients are up to speed")
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    if not WEFT_BIN.exists():
        sys.exit(f"{WEFT_BIN} missing: cargo build --release -p weft-server")
    n = options.requests
    work = Path(tempfile.mkdtemp(prefix="weft-cluster-bench-"))
    distributed = work / "distributed.toml"
    distributed.write_text(DISTRIBUTED)
    replicated = work / "replicated.toml"
    replicated.write_text(REPLICATED)
    results: dict[str, list[float]] = {}

    # One node: the same cache, on a server of its own.
    port, single = single_node(distributed, work)
    try:
        for pipeline in (1, 16):
            count = n if pipeline == 1 else 10 * n
            for test in ("set", "get"):
                results[f"single {test} P{pipeline}"] = list(
                    measured([single.pid], count, [argv(port, test, pipeline, count, 50, False)]))
        results["single replicated get P16"] = list(
            measured([single.pid], 10 * n, [argv(port, "get", 16, 10 * n, 48, False)]))
    finally:
        stop(single)

    ports, nodes = launch_nodes(3, distributed)
    pids = [node.pid for node in nodes]
    try:
        wait_ready(ports, nodes)
        for pipeline in (1, 16):
            count = n if pipeline == 1 else 10 * n
            for test in ("set", "get"):
                results[f"cluster {test} P{pipeline}"] = list(
                    measured(pids, count, [argv(ports[0], test, pipeline, count, 50, True)]))
    finally:
        for process in nodes:
            stop(process)

    ports, nodes = launch_nodes(3, replicated)
    pids = [node.pid for node in nodes]
    try:
        wait_ready(ports, nodes)
        # Fill every key once through one node (replicated to all), then read through all.
        subprocess.run(argv(ports[0], "set", 16, 100_000, 50, False), capture_output=True, timeout=600)
        results["cluster replicated get P16"] = list(measured(
            pids, 10 * n, [argv(port, "get", 16, 10 * n // 3, 16, False) for port in ports]))
    finally:
        for process in nodes:
            stop(process)

    print("| test | pipeline | one node (req/s) | 3 nodes (req/s) | ratio | server CPU µs/req, one node | 3 nodes |")
    print("|---|---|---|---|---|---|---|")
    rows = [(f"{test.upper()}, distributed (owners = 2)", test, pipeline, f"{test} P{pipeline}")
            for pipeline in (1, 16) for test in ("set", "get")]
    rows.append(("GET, replicated, through every node", "get", 16, "replicated get P16"))
    for label, _, pipeline, key in rows:
        one, one_cpu = results[f"single {key}"]
        three, three_cpu = results[f"cluster {key}"]
        ratio = three / one if one else 0.0
        print(f"| {label} | {pipeline} | {one:,.0f} | {three:,.0f} | {ratio:.2f}x | {one_cpu:.1f} | {three_cpu:.1f} |")
    if options.json:
        options.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
