#!/usr/bin/env python3
"""Runs the same memcached load against the `memcached` daemon and `weft server` back to back,
on free loopback ports, and prints throughput ratios (Weft / memcached).

    cargo build --release -p weft-server && python3 bench/memcached_vs_memcached.py

The load generator is bench/mcload (Go, standard library only; built by this script): 50
connections, each keeping `pipeline` requests in flight, 100-byte values over 100k random
keys, every response checked. Matrix: SET then GET (so GETs hit), pipeline 1 and 16, text and
binary protocols. memcached runs with its defaults (4 threads) and 1 GiB of memory so nothing
is evicted; Weft with its defaults, memcached clients on the shared port. Each cell is bounded
(`--requests`, default 400,000 at pipeline 16 and a quarter of that at pipeline 1) and the
servers alternate `--rounds` times (default 2), keeping each one's best run.
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import Server, free_port, start_weft

HERE = Path(__file__).resolve().parent


def build_loadgen(out_dir: str) -> str:
    if shutil.which("go") is None:
        raise SystemExit("go is needed to build bench/mcload")
    binary = str(Path(out_dir) / "mcload")
    subprocess.run(["go", "build", "-o", binary, "."], cwd=HERE / "mcload", check=True)
    return binary


def start_memcached() -> Server:
    port = free_port()
    argv = ["memcached", "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "1024"]
    if subprocess.run(["id", "-u"], capture_output=True, text=True).stdout.strip() == "0":
        argv += ["-u", "root"]
    return Server("memcached", argv, port)


def load(loadgen: str, port: int, op: str, proto: str, pipeline: int, requests: int) -> float:
    argv = [loadgen, "-addr", f"127.0.0.1:{port}", "-op", op, "-proto", proto,
            "-conns", "50", "-pipeline", str(pipeline), "-requests", str(requests),
            "-keyspace", "100000", "-size", "100", "-timeout", "120s"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        raise RuntimeError(f"mcload failed against port {port}: {done.stderr.strip()}")
    return float(done.stdout.split()[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        loadgen = build_loadgen(tmp)
        memcached, weft = start_memcached(), start_weft()
        try:
            print(f"mcload, 50 connections, 100-byte values, 100k keys, best of {args.rounds} "
                  f"alternating rounds")
            print(f"{'proto':<7} {'op':<4} {'pipeline':>8} {'memcached ops/s':>16} "
                  f"{'weft ops/s':>12} {'weft/memcached':>15}")
            for proto in ("text", "binary"):
                for pipeline in (1, 16):
                    requests = args.requests if pipeline > 1 else args.requests // 4
                    for op in ("set", "get"):
                        best = {"memcached": 0.0, "weft": 0.0}
                        for _ in range(args.rounds):
                            for server in (memcached, weft):
                                rate = load(loadgen, server.port, op, proto, pipeline, requests)
                                best[server.name] = max(best[server.name], rate)
                        ratio = best["weft"] / best["memcached"]
                        print(f"{proto:<7} {op.upper():<4} {pipeline:>8} "
                              f"{best['memcached']:>16.0f} {best['weft']:>12.0f} {ratio:>15.2f}",
                              flush=True)
        finally:
            memcached.stop()
            weft.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
