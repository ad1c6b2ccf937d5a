#!/usr/bin/env python3
"""Durable PUT throughput: Weft with a `durability = "sync"` file store (over RESP and over Hot
Rod) against redis-server with `appendfsync always` and Infinispan 15.0.21 with a
SoftIndexFileStore `syncWrites(true)`, next to the disk's raw fsync rate; prints a Markdown table.

    cargo build --release -p weft-server && python3 bench/durable_writes.py --json /tmp/durable.json

Every write is acknowledged only once it is on disk, so a client thread with one request in
flight can go no faster than one fsync per write; with N threads a server can do better only by
sharing one fsync among concurrent writes (group commit). The matrix is 1, 4 and 16 client
threads, 100-byte values, 100% writes over a key space of 1,000,000 (mostly distinct keys):

* fsync ceiling: Python appends 4 KiB to a file in the benchmark's directory and calls
  os.fdatasync, for `--probe-seconds` (and at most 100,000 times); also
  `dd bs=4k count=2000 oflag=dsync` (`--no-dd` to skip). Writes per second of one writer.
* Weft RESP / Redis always: `redis-benchmark -t set -c THREADS -P 1 -d 100 -r KEYS -n N`.
  redis-benchmark runs a count, not a time: each cell first runs THREADS x 100 requests to
  estimate the rate, then about `--resp-warmup-seconds` worth, then `--seconds` worth (at most
  `--max-requests`), each under a timeout. redis-server gets `appendonly yes`,
  `appendfsync always`, `save ""`, automatic AOF rewrite off, `dir` a fresh directory.
* Weft Hot Rod / Infinispan SIFS: bench/hotrod's LoadGen (`--get-ratio 0 --preload false`, cache
  `bench`, Java client `--client`, 15.2 by default: its pipelined connection costs the client
  half the CPU of 15.0's pool, see docs/benchmarks.md), `--warmup-seconds` unrecorded (a fresh
  JVM per cell needs JIT warm-up) then `--seconds` measured, at most `--max-ops` writes.
  Infinispan is `InfinispanServer PORT --sifs DIR` (write-through, no passivation, no preload).

Weft runs with this configuration, `data-dir` a fresh directory:

    [server]
    data-dir = "/tmp/.../data"
    [caches.default]
    resp-database = 0
    [[caches.default.persistence.store]]
    type = "file"
    durability = "sync"
    [caches.bench]
    [[caches.bench.persistence.store]]
    type = "file"
    durability = "sync"

Each cell starts a fresh server on a free 127.0.0.1 port with a fresh data directory under
`--dir` (/tmp by default; it must be a real disk, not tmpfs), measures, stops the server and
deletes the directory. Rounds alternate the order of the servers; the table shows each cell's
best round. A target that fails is reported and the others go on. The server's CPU time (from
/proc) over the measured part is in the JSON. The default run (3 rounds, 6 s measured, 8 s
warm-up) takes about 9 minutes; `--quick` (1 round, 3 s + 3 s) is a smoke test.

Options: --rounds R, --seconds S, --warmup-seconds W, --resp-warmup-seconds, --threads 1,4,16,
--targets fsync,weft-resp,redis,weft-hotrod,infinispan, --client 15.0|15.2, --keys K,
--max-ops, --max-requests, --probe-seconds, --no-dd, --dir DIR, --json FILE, --quick, --rebuild.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hotrod_vs_infinispan import (GIVE_UP_AFTER_FAILURES, LOADGEN_JARS, SERVER_START_TIMEOUT_S,
                                  WEFT_BIN, Server, cpu_seconds, ensure_jar, free_port, interrupt,
                                  machine_busy, run_loadgen, start_infinispan, start_weft,
                                  wait_for_port)
from resp_vs_redis import run_benchmark

VALUE_BYTES = 100
TARGETS = ["fsync", "weft-resp", "redis", "weft-hotrod", "infinispan"]
SERVERS = [t for t in TARGETS if t != "fsync"]
LABELS = {"fsync": "fsync/s (1 writer)", "weft-resp": "Weft RESP", "redis": "Redis always",
          "weft-hotrod": "Weft Hot Rod", "infinispan": "Infinispan SIFS"}
PROBE_MAX_WRITES = 100_000
DD_COUNT = 2000


def weft_config(data_dir: Path) -> str:
    return f"""[server]
data-dir = {json.dumps(str(data_dir))}

[caches.default]
resp-database = 0
[[caches.default.persistence.store]]
type = "file"
durability = "sync"

[caches.bench]
[[caches.bench.persistence.store]]
type = "file"
durability = "sync"
"""


def filesystem_type(path: Path) -> str:
    """The type of the filesystem holding `path` (longest mount point prefix in mountinfo)."""
    path = path.resolve()
    best, kind = "", "?"
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        mount_point = fields[4]
        fs = fields[fields.index("-") + 1]
        if (str(path) == mount_point or str(path).startswith(mount_point.rstrip("/") + "/")) \
                and len(mount_point) >= len(best):
            best, kind = mount_point, fs
    return kind


def fsync_probe(directory: Path, seconds: float) -> dict:
    """One writer appending 4 KiB + fdatasync, for `seconds` and at most PROBE_MAX_WRITES times."""
    probe_dir = Path(tempfile.mkdtemp(prefix="fsync-probe-", dir=directory))
    path = probe_dir / "probe.bin"
    block = os.urandom(4096)
    latencies: list[float] = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        start = time.monotonic()
        deadline = start + seconds
        while len(latencies) < PROBE_MAX_WRITES:
            t0 = time.monotonic()
            os.write(fd, block)
            os.fdatasync(fd)
            t1 = time.monotonic()
            latencies.append(t1 - t0)
            if t1 >= deadline:
                break
        elapsed = time.monotonic() - start
    finally:
        os.close(fd)
        shutil.rmtree(probe_dir, ignore_errors=True)
    latencies.sort()

    def pct(p: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(p / 100 * len(latencies)))] * 1e6, 1)

    return {"ops_per_sec": round(len(latencies) / elapsed, 1), "writes": len(latencies),
            "seconds": round(elapsed, 3), "p50_us": pct(50), "p99_us": pct(99)}


def dd_probe(directory: Path) -> dict:
    """`dd bs=4k count=DD_COUNT oflag=dsync` into a fresh file; writes per second."""
    probe_dir = Path(tempfile.mkdtemp(prefix="dd-probe-", dir=directory))
    try:
        done = subprocess.run(["dd", "if=/dev/zero", f"of={probe_dir / 'dd.bin'}", "bs=4k",
                               f"count={DD_COUNT}", "oflag=dsync"], capture_output=True, text=True,
                              timeout=120, env={**os.environ, "LC_ALL": "C"}, stdin=subprocess.DEVNULL)
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
    match = re.search(r"copied, ([0-9.]+) s", done.stderr)
    if done.returncode != 0 or not match:
        raise RuntimeError(f"dd failed ({done.returncode}): {done.stderr[-300:]}")
    seconds = float(match.group(1))
    return {"ops_per_sec": round(DD_COUNT / seconds, 1), "writes": DD_COUNT, "seconds": seconds}


def start_redis_aof(data_dir: Path, log: Path) -> Server:
    port = free_port()
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "yes", "--appendfsync", "always", "--auto-aof-rewrite-percentage", "0",
            "--dir", str(data_dir), "--daemonize", "no", "--protected-mode", "yes",
            "--logfile", str(log)]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               stdin=subprocess.DEVNULL)
    server = Server("redis", process, port, log)
    try:
        try:
            wait_for_port(port, "redis", timeout_s=SERVER_START_TIMEOUT_S, process=process)
        except RuntimeError:
            server.check_alive()
            raise
    except BaseException:
        server.stop()
        raise
    return server


def resp_cell(server: Server, threads: int, args) -> dict:
    """redis-benchmark SETs sized from a short estimate, then the measured run; its ops/s and the
    server's CPU seconds over the measured run."""
    def run(requests: int, timeout_s: float) -> float:
        return run_benchmark(server.port, "set", 1, VALUE_BYTES, requests, clients=threads,
                             keyspace=args.keys, timeout_s=timeout_s)

    def size(rate: float, seconds: float) -> int:
        return int(min(args.max_requests, max(threads * 100, rate * seconds)))

    estimate = run(max(100, threads * 100), 60)
    warm = run(size(estimate, args.resp_warmup_seconds), max(30, 5 * args.resp_warmup_seconds))
    requests = size(warm, args.seconds)
    pid = server.process.pid
    cpu_start, started = cpu_seconds(pid), time.monotonic()
    rate = run(requests, max(30, 4 * args.seconds))
    elapsed = time.monotonic() - started
    cpu = cpu_seconds(pid) - cpu_start
    server.check_alive()
    return {"ops_per_sec": rate, "requests": requests, "wall_seconds": round(elapsed, 3),
            "estimate_ops_per_sec": estimate, "warmup_ops_per_sec": warm,
            "server_cpu_seconds": round(cpu, 3), "server_cpu_us_per_op": round(cpu / requests * 1e6, 2)}


def error_line(log: Path) -> str | None:
    """The first `Error: …` line of a server log (Weft's fatal configuration or startup error)."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return None
    return next((line for line in text.splitlines() if line.startswith("Error:")), None)


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def run_cell(target: str, threads: int, args, workdir: Path, tag: str) -> dict:
    """Starts the target on a fresh data directory, measures, stops it, deletes the directory."""
    if target == "fsync":
        result = fsync_probe(args.dir, args.probe_seconds)
        if not args.no_dd:
            try:
                result["dd"] = dd_probe(args.dir)
            except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                result["dd_error"] = str(e)
        return {"result": result}
    record: dict = {}
    data_dir = Path(tempfile.mkdtemp(prefix=f"weft-durable-{target}-", dir=args.dir))
    log = workdir / f"{tag}.log"
    server = None
    try:
        if target.startswith("weft"):
            binary = WEFT_BIN.stat() if WEFT_BIN.exists() else None
            record["weft_bin_mtime"] = (time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(binary.st_mtime))
                                        if binary else None)
            config = workdir / f"{tag}.toml"
            config.write_text(weft_config(data_dir / "data"))
            try:
                server = start_weft(config, log)
            except RuntimeError as e:
                line = error_line(log)
                raise RuntimeError(f"weft did not start: {line}" if line else str(e)) from e
        elif target == "redis":
            server = start_redis_aof(data_dir, log)
        else:
            server = start_infinispan(log, ["--sifs", str(data_dir / "sifs")])
        if target in ("weft-resp", "redis"):
            record["result"] = resp_cell(server, threads, args)
        else:
            record["result"] = run_loadgen(server, threads, VALUE_BYTES, args, args.client,
                                           ["--preload", "false"])
    finally:
        if server is not None:
            record["server_exit"] = server.stop()
        try:
            record["data_bytes"] = dir_bytes(data_dir)
        except OSError:
            pass
        shutil.rmtree(data_dir, ignore_errors=True)
    return record


def best_runs(results: list[dict]) -> dict:
    best: dict = {}
    for record in results:
        result = record.get("result")
        if not result:
            continue
        cell = (record["target"], record["threads"])
        if cell not in best or result["ops_per_sec"] > best[cell]["ops_per_sec"]:
            best[cell] = result
    return best


def table(results: list[dict], threads_list: list[int], rounds: int) -> str:
    best = best_runs(results)
    fsync = max((r["result"]["ops_per_sec"] for r in results if r["target"] == "fsync" and "result" in r),
                default=None)
    dd = max((r["result"]["dd"]["ops_per_sec"] for r in results
              if r["target"] == "fsync" and "dd" in r.get("result", {})), default=None)

    def rate(target: str, threads: int) -> str:
        run = best.get((target, threads))
        return f"{run['ops_per_sec']:,.0f}" if run else "—"

    def ratio(a: str, b: str, threads: int) -> str:
        x, y = best.get((a, threads)), best.get((b, threads))
        return f"{x['ops_per_sec'] / y['ops_per_sec']:.2f}" if x and y and y["ops_per_sec"] else "—"

    def p99(target: str, threads: int) -> str:
        run = best.get((target, threads))
        return f"{run['p99_us']:,.0f}" if run and run.get("p99_us") is not None else "—"

    lines = ["| threads | fsync/s (1 writer) | Weft RESP | Redis always | **Weft/Redis** | Weft Hot Rod "
             "| Infinispan SIFS | **Weft/ISPN** | Weft HR p99 µs | ISPN p99 µs |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for threads in threads_list:
        lines.append(f"| {threads} | {f'{fsync:,.0f}' if fsync else '—'} | {rate('weft-resp', threads)} "
                     f"| {rate('redis', threads)} | {ratio('weft-resp', 'redis', threads)} "
                     f"| {rate('weft-hotrod', threads)} | {rate('infinispan', threads)} "
                     f"| {ratio('weft-hotrod', 'infinispan', threads)} | {p99('weft-hotrod', threads)} "
                     f"| {p99('infinispan', threads)} |")
    lines.append("")
    lines.append(f"Durable writes/s, 100 B values, best of {rounds} round(s). fsync/s: one writer "
                 "appending 4 KiB + fdatasync (best round; the same for every row)"
                 + (f"; dd oflag=dsync: {dd:,.0f} writes/s" if dd else "") + ".")
    for r in results:
        if "error" in r:
            lines.append(f"- {r['target']} threads={r['threads']} round {r['round']}: FAILED: "
                         f"{r['error'].splitlines()[0][:300]}")
        elif r.get("result", {}).get("errors") or r.get("result", {}).get("server_died"):
            lines.append(f"- {r['target']} threads={r['threads']} round {r['round']}: "
                         f"{r['result'].get('errors')} errors"
                         + (f", server {r['result']['server_died'][:200]}" if r["result"].get("server_died") else ""))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0, help="measured seconds per cell")
    parser.add_argument("--warmup-seconds", type=float, default=8.0,
                        help="LoadGen warm-up per Hot Rod cell (fresh JVMs)")
    parser.add_argument("--resp-warmup-seconds", type=float, default=1.0)
    parser.add_argument("--threads", default="1,4,16")
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--client", default="15.2", choices=sorted(LOADGEN_JARS),
                        help="Hot Rod Java client LoadGen runs with")
    parser.add_argument("--keys", type=int, default=1_000_000, help="key space (LoadGen --keys, redis-benchmark -r)")
    parser.add_argument("--max-ops", type=int, default=5_000_000, help="most writes per LoadGen window")
    parser.add_argument("--max-requests", type=int, default=2_000_000, help="most requests per redis-benchmark run")
    parser.add_argument("--probe-seconds", type=float, default=3.0)
    parser.add_argument("--no-dd", action="store_true", help="skip the dd oflag=dsync probe")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()),
                        help="where the data directories go (a real disk)")
    parser.add_argument("--json", type=Path, help="write the raw results here")
    parser.add_argument("--quick", action="store_true", help="1 round, 3 s warm-up + 3 s measured, 2 s probe")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the Java jars even if up to date")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.seconds, args.warmup_seconds, args.probe_seconds = 1, 3.0, 3.0, 2.0
    args.get_ratio = 0.0  # LoadGen: 100% PUT
    threads_list = [int(t) for t in args.threads.split(",")]
    targets = [t.strip() for t in args.targets.split(",")]
    if not set(targets) <= set(TARGETS):
        parser.error(f"--targets takes some of {','.join(TARGETS)}")
    if not all(t >= 1 for t in threads_list) or args.seconds <= 0 or args.keys < 1:
        parser.error("threads, --seconds and --keys must be positive")
    args.dir = args.dir.resolve()
    fs = filesystem_type(args.dir)
    if fs in ("tmpfs", "ramfs"):
        print(f"warning: {args.dir} is on {fs}: fsync costs nothing there; pass --dir on a real disk",
              file=sys.stderr, flush=True)

    signal.signal(signal.SIGTERM, interrupt)
    if {"weft-hotrod", "infinispan"} & set(targets):
        ensure_jar(args.rebuild)
    workdir = Path(tempfile.mkdtemp(prefix="weft-durable-bench-"))
    servers = [t for t in SERVERS if t in targets]
    results: list[dict] = []
    failures_in_a_row = {t: 0 for t in targets}
    succeeded = {t: False for t in targets}

    def save() -> None:
        if args.json:
            settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "json"}
            args.json.write_text(json.dumps({
                "settings": {**settings, "threads": threads_list, "targets": targets,
                             "value_bytes": VALUE_BYTES, "filesystem": fs, "weft_bin": str(WEFT_BIN),
                             "jar": str(LOADGEN_JARS[args.client])},
                "runs": results}, indent=1) + "\n")

    print(f"durable writes: {args.rounds} round(s), threads {threads_list}, {args.seconds:g} s measured "
          f"(+{args.warmup_seconds:g} s warm-up on Hot Rod), data under {args.dir} ({fs}); logs in {workdir}",
          file=sys.stderr, flush=True)
    busy = machine_busy()
    if busy > 0.1:
        print(f"warning: the machine's CPUs are {busy:.0%} busy before starting: other work will skew "
              "the numbers (each run records cpu_busy_before)", file=sys.stderr, flush=True)
    try:
        for round_no in range(1, args.rounds + 1):
            order = servers if round_no % 2 == 1 else list(reversed(servers))
            cells = ([("fsync", 0)] if "fsync" in targets else []) + \
                [(target, threads) for threads in threads_list for target in order]
            for target, threads in cells:
                record = {"round": round_no, "target": target, "threads": threads,
                          "cpu_busy_before": machine_busy(0.5)}
                if not succeeded[target] and failures_in_a_row[target] >= GIVE_UP_AFTER_FAILURES:
                    record["error"] = "skipped: failed every earlier cell"
                    results.append(record)
                    continue
                try:
                    record.update(run_cell(target, threads, args, workdir, f"{target}-r{round_no}-t{threads}"))
                    failures_in_a_row[target] = 0
                    succeeded[target] = True
                except (RuntimeError, OSError, TimeoutError, ValueError, subprocess.SubprocessError) as e:
                    record["error"] = f"{type(e).__name__}: {e}"
                    failures_in_a_row[target] += 1
                results.append(record)
                save()
                r = record.get("result")
                if r is None:
                    summary = f"FAILED {record['error'].splitlines()[0][:200]}"
                elif target == "fsync":
                    summary = (f"{r['ops_per_sec']:>9,.0f} fdatasync/s  p50 {r['p50_us']:.0f} µs  p99 {r['p99_us']:.0f} µs"
                               + (f"  dd {r['dd']['ops_per_sec']:,.0f}/s" if "dd" in r else ""))
                elif "p99_us" in r:
                    summary = (f"{r['ops_per_sec']:>9,.0f} writes/s  p99 {r['p99_us']:.0f} µs  errors {r['errors']}  "
                               f"server CPU {r['server_cpu_window_seconds']}s")
                else:
                    summary = (f"{r['ops_per_sec']:>9,.0f} writes/s  {r['requests']} requests  "
                               f"server CPU {r['server_cpu_us_per_op']} µs/op")
                print(f"round {round_no} {target:<11} threads {threads:>2}: {summary}  "
                      f"(busy before {record['cpu_busy_before']:.0%})", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        print("interrupted: reporting what ran", file=sys.stderr)
    finally:
        save()
    print(table(results, threads_list, args.rounds))
    return 0 if any("result" in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
