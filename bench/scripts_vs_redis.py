#!/usr/bin/env python3
"""Runs scripted commands — EVALSHA of a small script and FCALL of a small function —
through redis-benchmark against redis-server and `weft server` back to back, on free
loopback ports, and prints throughput ratios (Weft / Redis).

    cargo build --release -p weft-server && python3 bench/scripts_vs_redis.py

The script and the function do what rate limiters and job queues do per call: INCR a key
drawn from 100k random ones and set its expiry the first time. 50 clients, pipeline 1 and
16, a bounded number of requests per run (`--requests`, default 200,000); the servers
alternate `--rounds` times (default 2) and each keeps its best run.
"""

import argparse
import subprocess
import sys

from common import start_redis, start_weft
from resp_vs_redis import run_command_benchmark

SCRIPT = (
    "local n = redis.call('incr', KEYS[1]) "
    "if n == 1 then redis.call('expire', KEYS[1], 60) end "
    "return n"
)
LIBRARY = "#!lua name=bench\nredis.register_function('hit', function(keys, args) " + SCRIPT.replace(
    "KEYS", "keys") + " end)"


def prepare(port: int) -> str:
    """Loads the script and the library; the script's SHA1."""
    def cli(*args: str) -> str:
        return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True,
                              text=True, timeout=30, check=True).stdout.strip()
    cli("FUNCTION", "LOAD", "REPLACE", LIBRARY)
    return cli("SCRIPT", "LOAD", SCRIPT)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    redis, weft = start_redis(), start_weft()
    try:
        shas = {server.name: prepare(server.port) for server in (redis, weft)}
        assert shas["redis"] == shas["weft"], shas
        sha = shas["weft"]
        tests = {
            "EVALSHA": ["EVALSHA", sha, "1", "rate:__rand_int__"],
            "FCALL": ["FCALL", "hit", "1", "rate:__rand_int__"],
        }
        print(f"redis-benchmark, 50 clients, {args.requests} requests per run, 100k keys, "
              f"best of {args.rounds} alternating rounds")
        print(f"{'test':<8} {'pipeline':>8} {'redis ops/s':>12} {'weft ops/s':>12} {'weft/redis':>10}")
        for pipeline in (1, 16):
            for name, command in tests.items():
                best = {"redis": 0.0, "weft": 0.0}
                for _ in range(args.rounds):
                    for server in (redis, weft):
                        rate = run_command_benchmark(server.port, command, pipeline, args.requests)
                        best[server.name] = max(best[server.name], rate)
                ratio = best["weft"] / best["redis"] if best["redis"] else float("nan")
                print(f"{name:<8} {pipeline:>8} {best['redis']:>12.0f} {best['weft']:>12.0f} "
                      f"{ratio:>10.2f}", flush=True)
    finally:
        redis.stop()
        weft.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
