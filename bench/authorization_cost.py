#!/usr/bin/env python3
"""The cost of authentication and authorization per request: `weft server` with security off
against `weft server` with a users file (every request authorized by role, the client an
`application` user) back to back, with redis-benchmark; prints throughput ratios (secured /
open) and each server's CPU per request.

    cargo build --release -p weft-server && python3 bench/authorization_cost.py

Matrix: SET and GET, 50 clients, pipeline 1 and 16, 100-byte values, 100k random keys; each
cell a bounded number of requests (--requests, default 400,000); servers alternate --rounds
times (default 3) and each keeps its best run. --json FILE saves every run.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from common import WEFT_BIN, cpu_seconds, start_weft  # noqa: E402

USER, PASSWORD = "app", "app-bench-pw"


def users_file(directory: Path) -> Path:
    path = directory / "users.toml"
    subprocess.run([str(WEFT_BIN), "user", "create", USER, "--groups", "application",
                    "--users-file", str(path)],
                   env={**os.environ, "WEFT_USER_PASSWORD": PASSWORD}, check=True, timeout=60,
                   capture_output=True)
    config = directory / "weft.toml"
    config.write_text(f'[security]\nusers-file = "{path}"\n')
    return config


def benchmark(port: int, credentials: bool, test: str, pipeline: int, requests: int) -> float:
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", test, "-n",
            str(requests), "-r", "100000", "-c", "50", "-P", str(pipeline), "-d", "100", "--csv"]
    if credentials:
        argv += ["--user", USER, "-a", PASSWORD]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True)
    if "error" in done.stdout.lower() or "noperm" in done.stdout.lower():
        raise RuntimeError(f"redis-benchmark reported errors: {done.stdout[-500:]}")
    for line in done.stdout.splitlines()[1:]:
        fields = [f.strip('"') for f in line.split(",")]
        if fields and fields[0].upper().startswith(test.upper()):
            return float(fields[1])
    raise RuntimeError(f"no result for {test} in {done.stdout!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    config = users_file(Path(tempfile.mkdtemp(prefix="weft-authz-bench-")))
    open_server = start_weft()
    open_server.name = "open"
    secured = start_weft(["--config", str(config)])
    secured.name = "secured"
    runs = []
    try:
        print(f"redis-benchmark, 50 clients, {args.requests} requests per run, 100k keys, "
              f"100-byte values, best of {args.rounds} alternating rounds")
        print("| test | pipeline | security off (req/s) | users + roles (req/s) | secured / off "
              "| server CPU µs/req, off | secured |")
        print("|---|---|---|---|---|---|---|")
        for pipeline in (1, 16):
            for test in ("set", "get"):
                best = {}
                for round_ in range(args.rounds):
                    order = (open_server, secured) if round_ % 2 == 0 else (secured, open_server)
                    for server in order:
                        before = cpu_seconds([server.process.pid])
                        rate = benchmark(server.port, server is secured, test, pipeline,
                                         args.requests)
                        cpu_us = (cpu_seconds([server.process.pid]) - before) * 1e6 / args.requests
                        runs.append({"server": server.name, "test": test, "pipeline": pipeline,
                                     "round": round_, "rate": rate, "cpu_us_per_request": cpu_us})
                        if server.name not in best or rate > best[server.name][0]:
                            best[server.name] = (rate, cpu_us)
                ratio = best["secured"][0] / best["open"][0]
                print(f"| {test.upper()} | {pipeline} | {best['open'][0]:,.0f} "
                      f"| {best['secured'][0]:,.0f} | {ratio:.2f}× | {best['open'][1]:.2f} "
                      f"| {best['secured'][1]:.2f} |", flush=True)
    finally:
        open_server.stop()
        secured.stop()
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
