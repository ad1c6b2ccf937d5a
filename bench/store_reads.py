#!/usr/bin/env python3
"""Reads when the data is 10x larger than the memory bound: Weft with a file store and
`memory.max-count` = entries / 10 (nine reads in ten miss memory and read the store), against
the same data all in memory (Weft with the same store, unbounded) and redis-server (memory
only), by redis-benchmark GET over random keys. Prints a Markdown table of ratios.

    cargo build --release -p weft-server && python3 bench/store_reads.py --json /tmp/reads.json

Each target: a fresh server (free 127.0.0.1 port, fresh data directory), N entries loaded
with pipelined SETs (keys k000000000000..., 100-byte values), then for pipeline 1 and 16:
`redis-benchmark -t get`-style `GET k__rand_int__ -r N -c 50 -n REQUESTS`, best of --rounds.
The data files are in the page cache (the machine has far more RAM than the data): this
measures the read path through the store (index lookup, pread, CRC check, insert into memory,
eviction of another entry), not a cold disk. Every load and run is bounded in count and time.

Options: --entries N (1,000,000), --requests R (200,000), --rounds (2), --targets, --json FILE.
"""

import argparse
import csv
import io
import json
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from hotrod_vs_infinispan import Server, free_port, start_weft, tail, wait_for_port

VALUE_BYTES = 100
BATCH = 10_000
TARGETS = ["weft-bounded", "weft-memory", "redis"]


def weft_config(data_dir: Path, bound: int | None) -> str:
    memory = f"memory.max-count = {bound}\n" if bound else ""
    return f"""[server]
data-dir = {json.dumps(str(data_dir))}

[caches.default]
resp-database = 0
{memory}[[caches.default.persistence.store]]
type = "file"
durability = "none"
"""


def load(port: int, entries: int, timeout_s: float = 60) -> None:
    """SETs k000000000000.. (redis-benchmark's __rand_int__ form) to 100-byte values."""
    value = b"v" * VALUE_BYTES
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        for start in range(0, entries, BATCH):
            stop = min(start + BATCH, entries)
            sock.sendall(b"".join(
                b"*3\r\n$3\r\nSET\r\n$13\r\nk%012d\r\n$%d\r\n%s\r\n" % (i, VALUE_BYTES, value)
                for i in range(start, stop)))
            expected, got = (stop - start) * 5, 0
            while got < expected:
                chunk = sock.recv(1 << 20)
                if not chunk:
                    raise RuntimeError("server closed the connection while loading")
                got += len(chunk)


def get_rate(port: int, entries: int, pipeline: int, requests: int) -> float:
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-n", str(requests),
            "-r", str(entries), "-c", "50", "-P", str(pipeline), "--csv",
            "GET", "k__rand_int__"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True)
    if "error" in (done.stderr + done.stdout).lower():
        raise RuntimeError(f"redis-benchmark reported errors: {done.stdout[-300:]}")
    rows = list(csv.reader(io.StringIO(done.stdout)))
    return float(rows[-1][1])


def start(target: str, workdir: Path, entries: int) -> Server:
    log = workdir / f"{target}.log"
    if target == "redis":
        port = free_port()
        out = log.open("wb")
        process = subprocess.Popen(["redis-server", "--port", str(port), "--save", "",
                                    "--appendonly", "no", "--dir", str(workdir)],
                                   stdout=out, stderr=subprocess.STDOUT)
        wait_for_port(port, "redis", process=process)
        return Server("redis", process, port, log)
    bound = entries // 10 if target == "weft-bounded" else None
    config = workdir / f"{target}.toml"
    config.write_text(weft_config(workdir / f"{target}-data", bound))
    return start_weft(config, log)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--json")
    args = parser.parse_args()
    targets = args.targets.split(",")
    results: dict[str, dict[int, float]] = {t: {} for t in targets}
    workdir = Path(tempfile.mkdtemp(prefix="weft-store-reads-"))
    try:
        for target in targets:
            server = start(target, workdir, args.entries)
            try:
                print(f"{target}: loading {args.entries} entries", file=sys.stderr, flush=True)
                load(server.port, args.entries)
                for pipeline in (1, 16):
                    best = 0.0
                    for _ in range(args.rounds):
                        best = max(best, get_rate(server.port, args.entries, pipeline, args.requests))
                    results[target][pipeline] = best
                    print(f"{target} pipeline {pipeline}: {best:,.0f} GET/s", file=sys.stderr, flush=True)
                server.check_alive()
            except Exception as error:  # one target failing must not hide the others
                print(f"{target} failed: {error}\n{tail(server.log)}", file=sys.stderr)
            finally:
                server.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\nGET/s, 50 clients, {args.entries:,} entries of {VALUE_BYTES} B, random keys, "
          f"best of {args.rounds}; weft-bounded holds {args.entries // 10:,} in memory\n")
    print("| pipeline | Weft, 10x memory | Weft, all in memory | Redis | bounded / in memory | bounded / Redis |")
    print("|---:|---:|---:|---:|---:|---:|")
    for pipeline in (1, 16):
        bounded = results.get("weft-bounded", {}).get(pipeline, 0)
        memory = results.get("weft-memory", {}).get(pipeline, 0)
        redis = results.get("redis", {}).get(pipeline, 0)
        ratio = lambda a, b: f"{a / b:.2f}" if a and b else "-"
        print(f"| {pipeline} | {bounded:,.0f} | {memory:,.0f} | {redis:,.0f} | "
              f"{ratio(bounded, memory)} | {ratio(bounded, redis)} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"entries": args.entries, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
