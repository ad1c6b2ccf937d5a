#!/usr/bin/env python3
"""Runs redis-benchmark's data-type tests against redis-server and `weft server` back to back,
on free loopback ports, and prints throughput ratios (Weft / Redis).

    cargo build --release -p weft-server && python3 bench/resp_types_vs_redis.py

Tests: LPUSH LPOP SADD HSET ZADD (redis-benchmark's own: one list, set, hash and sorted set
each, members drawn from 100k random values), 50 clients, pipeline 1 and 16. Each cell runs a
bounded number of requests (`--requests`, default 200,000); the servers alternate `--rounds`
times (default 2) and each keeps its best run.
"""

import argparse
import sys

from common import start_redis, start_weft
from resp_vs_redis import run_benchmark

TESTS = ("lpush", "lpop", "sadd", "hset", "zadd")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    redis, weft = start_redis(), start_weft()
    try:
        print(f"redis-benchmark, 50 clients, {args.requests} requests per run, 100k random "
              f"members, best of {args.rounds} alternating rounds")
        print(f"{'test':<6} {'pipeline':>8} {'redis ops/s':>12} {'weft ops/s':>12} {'weft/redis':>10}")
        for pipeline in (1, 16):
            for test in TESTS:
                best = {"redis": 0.0, "weft": 0.0}
                for _ in range(args.rounds):
                    for server in (redis, weft):
                        rate = run_benchmark(server.port, test, pipeline, 3, args.requests)
                        best[server.name] = max(best[server.name], rate)
                ratio = best["weft"] / best["redis"] if best["redis"] else float("nan")
                print(f"{test.upper():<6} {pipeline:>8} {best['redis']:>12.0f} "
                      f"{best['weft']:>12.0f} {ratio:>10.2f}", flush=True)
    finally:
        redis.stop()
        weft.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
