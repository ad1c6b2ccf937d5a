#!/usr/bin/env python3
"""Restart time with data on disk: loads N entries (10-byte keys, 100-byte values) over RESP,
stops the server with SIGTERM, starts it again on the same data and measures how long until its
port answers and until DBSIZE is N; Weft with a file store against redis-server with an AOF and
with an RDB snapshot of the same data. Prints a Markdown table.

    cargo build --release -p weft-server && python3 bench/restart_time.py --json /tmp/restart.json

Targets:
* weft: cache `default` (RESP database 0) with a file store, `durability = "none"`, `preload =
  true`, `data-dir` a fresh directory. The `preloaded` line Weft logs at info (entries,
  elapsed_ms) is reported too when present.
* redis-aof: `appendonly yes`, `appendfsync everysec`, automatic AOF rewrite off (so the restart
  replays N SETs from the AOF), `save ""`.
* redis-rdb: `appendonly no`, `save ""`, then `SAVE` after the load (the restart loads the RDB
  snapshot, rdbcompression on as by default).

Each target: fresh directory under --dir, start, load (pipelined SETs of one random 100-byte
value), check DBSIZE, stop (SIGTERM, timed), then --restarts times: start on the same directory,
time to the port accepting connections and to DBSIZE answering N, stop. The data files are in
the page cache on restart (written just before): this measures parsing and rebuilding the
in-memory data, not reading a cold disk. Every wait is bounded (--timeout), every load by N.

Options: --entries N (1,000,000), --value-bytes (100), --restarts R (2), --targets
weft,redis-aof,redis-rdb, --timeout S (300), --dir DIR, --json FILE.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from durable_writes import dir_bytes, error_line, filesystem_type
from hotrod_vs_infinispan import WEFT_BIN, Server, free_port, interrupt, tail, wait_for_port
from memory_overhead import load

ANSI = re.compile(r"\x1b\[[0-9;]*m")
TARGETS = ["weft", "redis-aof", "redis-rdb"]


def weft_config(data_dir: Path) -> str:
    return f"""[server]
data-dir = {json.dumps(str(data_dir))}

[caches.default]
resp-database = 0
[[caches.default.persistence.store]]
type = "file"
durability = "none"
preload = true
"""


def start(target: str, port: int, data_dir: Path, workdir: Path, log: Path) -> Server:
    """Starts the target on `port` with its data in `data_dir`; returns once the port accepts
    connections (or raises: the process exited, or --timeout passed)."""
    if target == "weft":
        if not WEFT_BIN.exists():
            raise RuntimeError(f"{WEFT_BIN} missing: run `cargo build --release -p weft-server`")
        config = workdir / "weft.toml"
        config.write_text(weft_config(data_dir / "data"))
        argv = [str(WEFT_BIN), "server", "--bind", f"127.0.0.1:{port}", "--config", str(config)]
        with log.open("ab") as out:
            process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env={**os.environ, "NO_COLOR": "1"})
    else:
        aof = target == "redis-aof"
        argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "yes" if aof else "no", "--appendfsync", "everysec",
                "--auto-aof-rewrite-percentage", "0", "--dir", str(data_dir), "--daemonize", "no",
                "--protected-mode", "yes", "--logfile", str(log)]
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   stdin=subprocess.DEVNULL)
    server = Server(target, process, port, log)
    try:
        try:
            wait_for_port(port, target, timeout_s=ARGS.timeout, process=process)
        except RuntimeError as e:
            line = error_line(log) if target == "weft" else None
            raise RuntimeError(line or f"{e}: {tail(log, 500)}") from e
    except BaseException:
        server.stop()
        raise
    return server


def command(port: int, *args: bytes, timeout_s: float = 10.0) -> bytes:
    """One RESP command; its raw reply (a simple string, integer or error line)."""
    request = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(request)
        reply = b""
        while not reply.endswith(b"\r\n"):
            chunk = sock.recv(4096)
            if not chunk:
                raise OSError("connection closed")
            reply += chunk
    return reply.strip()


def wait_for_dbsize(server: Server, entries: int, deadline: float) -> int:
    """Polls DBSIZE until it is `entries` (a loading Redis answers -LOADING); returns the last
    size seen, raising when the deadline passes first."""
    last = None
    while time.monotonic() < deadline:
        server.check_alive()
        try:
            reply = command(server.port, b"DBSIZE", timeout_s=max(0.1, deadline - time.monotonic()))
            if reply.startswith(b":"):
                last = int(reply[1:])
                if last == entries:
                    return last
        except OSError:
            pass
        time.sleep(0.01)
    raise TimeoutError(f"DBSIZE was {last}, not {entries}, after {ARGS.timeout:g}s")


def server_reported(target: str, log: Path, since: int) -> dict:
    """What the server logged about loading, from byte `since` of its log on."""
    try:
        with log.open("rb") as f:
            f.seek(since)
            text = ANSI.sub("", f.read().decode(errors="replace"))
    except OSError:
        return {}
    if target == "weft":
        for line in text.splitlines():
            if "preloaded" not in line:
                continue
            entries = re.search(r"entries[=: ]+(\d+)", line) or re.search(r"preloaded (\d+) entries", line)
            elapsed = re.search(r"elapsed_ms[=: ]+(\d+)", line) or re.search(r"in (\d+) ?ms", line)
            return {"log_line": line.strip()[-200:],
                    "entries": int(entries.group(1)) if entries else None,
                    "load_ms": int(elapsed.group(1)) if elapsed else None}
        return {}
    # Redis 7 logs the AOF's base and incr files one by one, then the whole "append only file".
    for source in ("append only file", "disk"):
        match = re.search(rf"DB loaded from {source}: ([0-9.]+) seconds", text)
        if match:
            return {"log_line": match.group(0), "load_ms": round(float(match.group(1)) * 1000)}
    return {}


def run_target(target: str, args, workdir: Path) -> dict:
    data_dir = Path(tempfile.mkdtemp(prefix=f"weft-restart-{target}-", dir=args.dir))
    log = workdir / f"{target}.log"
    record: dict = {"target": target, "entries": args.entries, "restarts": []}
    server = None
    try:
        port = free_port()
        server = start(target, port, data_dir, workdir, log)
        started = time.monotonic()
        load(port, args.entries, args.value_bytes, timeout_s=args.timeout, random_value=True)
        record["load_seconds"] = round(time.monotonic() - started, 3)
        reply = command(port, b"DBSIZE")
        if reply != b":%d" % args.entries:
            raise RuntimeError(f"DBSIZE after loading is {reply!r}, not {args.entries}")
        if target == "redis-rdb":
            started = time.monotonic()
            reply = command(port, b"SAVE", timeout_s=args.timeout)
            if reply != b"+OK":
                raise RuntimeError(f"SAVE answered {reply!r}")
            record["save_seconds"] = round(time.monotonic() - started, 3)
        started = time.monotonic()
        record["stop_exit"] = server.stop()
        record["stop_seconds"] = round(time.monotonic() - started, 3)
        server = None
        record["data_bytes"] = dir_bytes(data_dir)
        print(f"{target:<9} loaded {args.entries} in {record['load_seconds']:.1f}s, stopped in "
              f"{record['stop_seconds']:.2f}s, {record['data_bytes'] / 1e6:.1f} MB on disk", file=sys.stderr, flush=True)
        for restart in range(1, args.restarts + 1):
            since = log.stat().st_size if log.exists() else 0
            port = free_port()
            t0 = time.monotonic()
            server = start(target, port, data_dir, workdir, log)
            port_s = time.monotonic() - t0
            wait_for_dbsize(server, args.entries, t0 + args.timeout)
            ready_s = time.monotonic() - t0
            run = {"restart": restart, "port_open_seconds": round(port_s, 3),
                   "all_entries_seconds": round(ready_s, 3),
                   "server_reported": server_reported(target, log, since)}
            record["stop_exit_after_restart"] = server.stop()
            server = None
            record["restarts"].append(run)
            print(f"{target:<9} restart {restart}: port open {port_s:.3f}s, DBSIZE = {args.entries} after "
                  f"{ready_s:.3f}s  {run['server_reported'].get('log_line', '')}", file=sys.stderr, flush=True)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    return record


def table(records: list[dict]) -> str:
    lines = ["| server | entries | load s | on disk MB | restart: port open s | restart: all entries s "
             "| server-reported load ms |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in records:
        if "error" in r:
            lines.append(f"| {r['target']} | {r['entries']:,} | FAILED: {r['error'].splitlines()[0][:200]} | | | | |")
            continue
        restarts = r["restarts"]
        reported = [x["server_reported"]["load_ms"] for x in restarts
                    if x["server_reported"].get("load_ms") is not None]
        port_open = f"{min(x['port_open_seconds'] for x in restarts):.3f}" if restarts else "—"
        all_entries = f"{min(x['all_entries_seconds'] for x in restarts):.3f}" if restarts else "—"
        lines.append(f"| {r['target']} | {r['entries']:,} | {r['load_seconds']:.1f} | {r['data_bytes'] / 1e6:.1f} "
                     f"| {port_open} | {all_entries} | {min(reported) if reported else '—'} |")
    lines.append("")
    lines.append("Best of the restarts (data files in the page cache). 'all entries': from starting the "
                 "process to DBSIZE answering N.")
    return "\n".join(lines)


ARGS = None


def main() -> int:
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--restarts", type=int, default=2)
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--timeout", type=float, default=300.0, help="most seconds for any one wait")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--json", type=Path)
    ARGS = args = parser.parse_args()
    targets = [t.strip() for t in args.targets.split(",")]
    if not set(targets) <= set(TARGETS) or args.entries < 1 or args.restarts < 1:
        parser.error(f"--targets takes some of {','.join(TARGETS)}; --entries and --restarts must be positive")
    args.dir = args.dir.resolve()
    fs = filesystem_type(args.dir)
    signal.signal(signal.SIGTERM, interrupt)
    workdir = Path(tempfile.mkdtemp(prefix="weft-restart-bench-"))
    print(f"restart time: {args.entries} entries of {args.value_bytes} B, data under {args.dir} ({fs}); "
          f"logs in {workdir}", file=sys.stderr, flush=True)
    records: list[dict] = []
    try:
        for target in targets:
            try:
                records.append(run_target(target, args, workdir))
            except (RuntimeError, OSError, TimeoutError, ValueError, subprocess.SubprocessError) as e:
                records.append({"target": target, "entries": args.entries, "error": f"{type(e).__name__}: {e}"})
                print(f"{target}: FAILED {e}", file=sys.stderr, flush=True)
            if args.json:
                args.json.write_text(json.dumps({"settings": {**{k: str(v) if isinstance(v, Path) else v
                                                                 for k, v in vars(args).items()},
                                                              "filesystem": fs},
                                                 "runs": records}, indent=1) + "\n")
    except KeyboardInterrupt:
        print("interrupted: reporting what ran", file=sys.stderr)
    print(table(records))
    return 0 if any("error" not in r for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
