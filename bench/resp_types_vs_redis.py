#!/usr/bin/env python3
"""Runs redis-benchmark's data-type tests against redis-server and `weft server` back to back,
on free loopback ports, and prints throughput ratios (Weft / Redis).

    cargo build --release -p weft-server && python3 bench/resp_types_vs_redis.py

Tests: LPUSH LPOP SADD HSET ZADD (redis-benchmark's own: one list, set, hash and sorted set
each, members drawn from 100k random values), then commands given to redis-benchmark whole,
in this order so each reads what the one before wrote: SETBIT (bit 100 of 100k keys) BITCOUNT
(of one of them), PFADD (one HyperLogLog) PFCOUNT, GEOADD (one geo set of 1,000 members
within a metre) GEOSEARCH (the 10 nearest of them all), XADD (`XADD mystream * field
__rand_int__`, generated IDs) XRANGE (`XRANGE mystream - + COUNT 10`). 50 clients, pipeline 1
and 16. Each cell runs a bounded number of requests (`--requests`, default 200,000); the
servers alternate `--rounds` times (default 2) and each keeps its best run.
"""

import argparse
import sys

from common import start_redis, start_weft
from resp_vs_redis import run_benchmark, run_command_benchmark

TESTS = ("lpush", "lpop", "sadd", "hset", "zadd")
# Commands run whole, by name; each reads the key the one before it filled.
COMMANDS = (
    # redis-benchmark writes `__rand_int__` with leading zeros, which no bit offset may have:
    # the bitmaps are 100k keys of 13 bytes instead of one large one.
    ("setbit", ["SETBIT", "bits:__rand_int__", "100", "1"], 100_000),
    ("bitcount", ["BITCOUNT", "bits:__rand_int__"], 100_000),
    ("pfadd", ["PFADD", "hll", "__rand_int__"], 100_000),
    ("pfcount", ["PFCOUNT", "hll"], 100_000),
    # 1,000 members within a metre of each other (`__rand_int__` only varies the last
    # digits): each search measures and sorts them all to return the 10 nearest.
    ("geoadd", ["GEOADD", "geo", "13.__rand_int__", "38.__rand_int__", "m__rand_int__"], 1_000),
    ("geosearch", ["GEOSEARCH", "geo", "FROMLONLAT", "13", "38", "BYRADIUS", "1", "km",
                   "COUNT", "10", "ASC"], 1_000),
    ("xadd", ["XADD", "mystream", "*", "field", "__rand_int__"], 100_000),
    ("xrange", ["XRANGE", "mystream", "-", "+", "COUNT", "10"], 100_000),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    redis, weft = start_redis(), start_weft()
    try:
        print(f"redis-benchmark, 50 clients, {args.requests} requests per run, 100k random "
              f"members, best of {args.rounds} alternating rounds")
        print(f"{'test':<9} {'pipeline':>8} {'redis ops/s':>12} {'weft ops/s':>12} {'weft/redis':>10}")
        for pipeline in (1, 16):
            runs = [(test, lambda port, test=test: run_benchmark(port, test, pipeline, 3, args.requests))
                    for test in TESTS]
            runs += [(name, lambda port, command=command, keyspace=keyspace: run_command_benchmark(
                port, command, pipeline, args.requests, keyspace=keyspace))
                for name, command, keyspace in COMMANDS]
            for test, run in runs:
                best = {"redis": 0.0, "weft": 0.0}
                for _ in range(args.rounds):
                    for server in (redis, weft):
                        best[server.name] = max(best[server.name], run(server.port))
                ratio = best["weft"] / best["redis"] if best["redis"] else float("nan")
                print(f"{test.upper():<9} {pipeline:>8} {best['redis']:>12.0f} "
                      f"{best['weft']:>12.0f} {ratio:>10.2f}", flush=True)
    finally:
        redis.stop()
        weft.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
