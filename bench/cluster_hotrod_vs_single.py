#!/usr/bin/env python3
"""Hot Rod throughput of a three-node cluster (a distributed cache, owners = 2, sync
replication) against one node, in the same run on the same machine, both driven by the
official Java client 15.2 (bench/hotrod's LoadGen: String keys, byte[] values, 80/20 GET/PUT on
keys preloaded with putAll).

    cargo build --release -p weft-server && python3 bench/cluster_hotrod_vs_single.py

The client is given one node's address; it learns the topology from the first responses and
from then on sends each key to its primary owner (HASH_DISTRIBUTION_AWARE). Every process
shares the machine's cores: each write is applied by a primary and a backup and crosses a
socket, so on a small machine the ratio shows the price of replication more than the gain of
more nodes. Rounds alternate the order (one node first, then the cluster first, ...); the
table shows each configuration's best round and the ratio cluster / single. --json saves
every run.

Options: --rounds R (2), --threads 1,16, --value-bytes 100, --seconds S (8),
--warmup-seconds W (6), --keys K (100000), --get-ratio G (0.8), --owners N (2).

`--owners 1` measures the ceiling this machine puts on the ratio: three processes and a client
sharing its cores, each key still sent to its one owner, with no replication at all.
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "interop"))

from hotrod_vs_infinispan import Server, ensure_jar, run_loadgen, start_weft  # noqa: E402
from weft_process import stop  # noqa: E402
from with_weft_cluster import launch_nodes, wait_ready  # noqa: E402

CACHE = """
[caches.bench]
mode = "distributed"
owners = {owners}
"""


def single(config: Path, work: Path, threads: int, value_bytes: int, args) -> dict:
    server = start_weft(config, work / "single.log")
    try:
        return run_loadgen(server, threads, value_bytes, args, client="15.2")
    finally:
        server.stop()


def cluster(config: Path, work: Path, threads: int, value_bytes: int, args) -> dict:
    ports, processes = launch_nodes(3, config)
    try:
        wait_ready(ports, processes)
        # run_loadgen reads the first node's CPU time; the others' is not reported.
        server = Server("weft cluster", processes[0], ports[0], work / "cluster.log")
        return run_loadgen(server, threads, value_bytes, args, client="15.2")
    finally:
        for process in processes:
            stop(process)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", default="1,16")
    parser.add_argument("--value-bytes", default="100")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--warmup-seconds", type=float, default=6.0)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--get-ratio", type=float, default=0.8)
    parser.add_argument("--max-ops", type=int, default=100_000_000)
    parser.add_argument("--owners", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    ensure_jar(False)
    work = Path(tempfile.mkdtemp(prefix="weft-cluster-hotrod-"))
    config = work / "weft.toml"
    config.write_text(CACHE.format(owners=args.owners))
    targets = {"single": single, "cluster": cluster}
    runs = []
    for round_ in range(args.rounds):
        order = ["single", "cluster"] if round_ % 2 == 0 else ["cluster", "single"]
        for threads in [int(t) for t in args.threads.split(",")]:
            for value_bytes in [int(v) for v in args.value_bytes.split(",")]:
                for target in order:
                    result = targets[target](config, work, threads, value_bytes, args)
                    print(f"round {round_ + 1}, {threads} threads, {value_bytes} B, {target}: "
                          f"{result['ops_per_sec']:,.0f} ops/s, p99 {result['p99_us']:.0f} us, "
                          f"errors {result['errors']}, get misses {result['get_misses']}",
                          file=sys.stderr, flush=True)
                    runs.append({"round": round_, "threads": threads, "value_bytes": value_bytes,
                                 "target": target, "result": result})
    best: dict[tuple, dict] = {}
    for run in runs:
        cell = (run["threads"], run["value_bytes"], run["target"])
        if cell not in best or run["result"]["ops_per_sec"] > best[cell]["ops_per_sec"]:
            best[cell] = run["result"]
    print(f"| threads | value | one node (ops/s) | p99 µs | 3 nodes, owners = {args.owners} (ops/s) "
          "| p99 µs | ratio |")
    print("|---|---|---|---|---|---|---|")
    for threads in [int(t) for t in args.threads.split(",")]:
        for value_bytes in [int(v) for v in args.value_bytes.split(",")]:
            one = best[(threads, value_bytes, "single")]
            three = best[(threads, value_bytes, "cluster")]
            ratio = three["ops_per_sec"] / one["ops_per_sec"] if one["ops_per_sec"] else 0.0
            print(f"| {threads} | {value_bytes} B | {one['ops_per_sec']:,.0f} | {one['p99_us']:.0f} "
                  f"| {three['ops_per_sec']:,.0f} | {three['p99_us']:.0f} | {ratio:.2f}x |")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2))
    failed = [r for r in runs if r["result"].get("errors") or r["result"].get("get_misses")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
