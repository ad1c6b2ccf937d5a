#!/usr/bin/env python3
"""RESP over TLS: redis-benchmark --tls against redis-server (its TLS port) and `weft server`
([server.tls], TLS and plaintext on one port) back to back, on free loopback ports, with the
same certificate (made by interop/tls_files.py); prints throughput ratios (Weft / Redis) and
each server's CPU per request.

    cargo build --release -p weft-server && python3 bench/resp_tls_vs_redis.py

Matrix: SET and GET, 50 clients, pipeline 1 and 16, 100-byte values, 100k random keys; each
cell a bounded number of requests (--requests, default 200,000); servers alternate --rounds
times (default 2) and each keeps its best run. --json FILE saves every run.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "interop"))

from common import Server, cpu_seconds, free_port, start_weft  # noqa: E402
from tls_files import make  # noqa: E402


def start_redis_tls(files: Path) -> Server:
    port = free_port()
    argv = ["redis-server", "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
            "--tls-cert-file", str(files / "server.pem"), "--tls-key-file", str(files / "server.key"),
            "--tls-ca-cert-file", str(files / "ca.pem"), "--tls-auth-clients", "no",
            "--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", "/dev/null"]
    return Server("redis", argv, port)


def tls_benchmark(port: int, ca: Path, test: str, pipeline: int, size: int, requests: int) -> float:
    argv = ["redis-benchmark", "--tls", "--cacert", str(ca), "-h", "127.0.0.1", "-p", str(port),
            "-t", test, "-n", str(requests), "-r", "100000", "-c", "50", "-P", str(pipeline),
            "-d", str(size), "--csv"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True)
    if "error" in (done.stderr + done.stdout).lower():
        raise RuntimeError(f"redis-benchmark reported errors: {done.stderr[-500:]} {done.stdout[-500:]}")
    for line in done.stdout.splitlines()[1:]:
        fields = [f.strip('"') for f in line.split(",")]
        if fields and fields[0].upper().startswith(test.upper()):
            return float(fields[1])
    raise RuntimeError(f"no result for {test} in {done.stdout!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    files = make(Path(tempfile.mkdtemp(prefix="weft-tls-bench-"))).parent
    redis = start_redis_tls(files)
    weft = start_weft(["--config", str(files / "weft.toml")])
    runs = []
    try:
        print(f"redis-benchmark --tls, 50 clients, {args.requests} requests per run, 100k keys, "
              f"100-byte values, best of {args.rounds} alternating rounds")
        print("| test | pipeline | redis-server TLS (req/s) | Weft TLS (req/s) | Weft / Redis "
              "| server CPU µs/req, Redis | Weft |")
        print("|---|---|---|---|---|---|---|")
        for pipeline in (1, 16):
            for test in ("set", "get"):
                best = {}
                for round_ in range(args.rounds):
                    order = (redis, weft) if round_ % 2 == 0 else (weft, redis)
                    for server in order:
                        before = cpu_seconds([server.process.pid])
                        rate = tls_benchmark(server.port, files / "ca.pem", test, pipeline, 100,
                                             args.requests)
                        cpu_us = (cpu_seconds([server.process.pid]) - before) * 1e6 / args.requests
                        runs.append({"server": server.name, "test": test, "pipeline": pipeline,
                                     "round": round_, "rate": rate, "cpu_us_per_request": cpu_us})
                        if server.name not in best or rate > best[server.name][0]:
                            best[server.name] = (rate, cpu_us)
                ratio = best["weft"][0] / best["redis"][0]
                print(f"| {test.upper()} | {pipeline} | {best['redis'][0]:,.0f} | {best['weft'][0]:,.0f} "
                      f"| {ratio:.2f}× | {best['redis'][1]:.1f} | {best['weft'][1]:.1f} |", flush=True)
    finally:
        redis.stop()
        weft.stop()
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
