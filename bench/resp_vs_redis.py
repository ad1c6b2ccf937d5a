#!/usr/bin/env python3
"""Runs redis-benchmark against redis-server and `weft server` back to back, on free
loopback ports, and prints throughput ratios (Weft / Redis).

    cargo build --release -p weft-server && python3 bench/resp_vs_redis.py

Matrix: SET and GET, 50 clients, pipeline 1 and 16, 100-byte and 1 KiB values, 100k random
keys. Each cell runs a bounded number of requests (`--requests`, default 200,000). Options:
--requests N, --rounds R (alternate the servers R times and keep each one's best run).
"""

import argparse
import csv
import io
import subprocess
import sys

from common import start_redis, start_weft


def run_benchmark(port: int, test: str, pipeline: int, size: int, requests: int,
                  clients: int = 50, keyspace: int = 100_000, timeout_s: float = 300) -> float:
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", test,
            "-n", str(requests), "-r", str(keyspace), "-c", str(clients), "-P", str(pipeline),
            "-d", str(size), "--csv"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=True)
    out = done.stdout
    # redis-benchmark reports server errors on stderr/stdout and still prints a rate.
    if "error" in (done.stderr + out).lower():
        raise RuntimeError(f"redis-benchmark reported errors: {done.stderr[-500:]} {out[-500:]}")
    rows = list(csv.reader(io.StringIO(out)))
    for row in rows[1:]:
        if row and row[0].upper().startswith(test.upper()):
            return float(row[1])
    raise RuntimeError(f"no result for {test} in: {out!r} / errors")


def run_command_benchmark(port: int, command: list[str], pipeline: int, requests: int,
                          clients: int = 50, keyspace: int = 100_000, timeout_s: float = 300) -> float:
    """Requests per second for one arbitrary command (redis-benchmark replaces each
    `__rand_int__` with a number below `keyspace`)."""
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-n", str(requests),
            "-r", str(keyspace), "-c", str(clients), "-P", str(pipeline), "--csv", *command]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=True)
    out = done.stdout
    if "error" in (done.stderr + out).lower():
        raise RuntimeError(f"redis-benchmark reported errors: {done.stderr[-500:]} {out[-500:]}")
    rows = list(csv.reader(io.StringIO(out)))
    for row in rows[1:]:
        if row and len(row) > 1:
            return float(row[1])
    raise RuntimeError(f"no result for {command[0]} in: {out!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    redis, weft = start_redis(), start_weft()
    try:
        print(f"redis-benchmark, 50 clients, {args.requests} requests per run, 100k keys, "
              f"best of {args.rounds} alternating rounds")
        print(f"{'test':<6} {'pipeline':>8} {'value':>6} {'redis ops/s':>12} {'weft ops/s':>12} {'weft/redis':>10}")
        for size in (100, 1024):
            for pipeline in (1, 16):
                for test in ("set", "get"):
                    best = {"redis": 0.0, "weft": 0.0}
                    for _ in range(args.rounds):
                        for server in (redis, weft):
                            rate = run_benchmark(server.port, test, pipeline, size, args.requests)
                            best[server.name] = max(best[server.name], rate)
                    ratio = best["weft"] / best["redis"] if best["redis"] else float("nan")
                    print(f"{test.upper():<6} {pipeline:>8} {size:>6} {best['redis']:>12.0f} "
                          f"{best['weft']:>12.0f} {ratio:>10.2f}", flush=True)
    finally:
        redis.stop()
        weft.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
