#!/usr/bin/env python3
"""Hot Rod load: `weft server` against a real Infinispan 15.0 embedded Hot Rod server, both driven
by the official Java client (bench/hotrod's LoadGen), and prints a Markdown table of the best
round per configuration.

    cargo build --release -p weft-server && python3 bench/hotrod_vs_infinispan.py --json out.json

Matrix: 1, 4 and 16 client threads x 100-byte and 1 KiB byte[] values, 80/20 GET/PUT on 100k
String keys preloaded with putAll, cache `bench` stored as application/x-protostream on both. Each
cell starts a fresh server on a free 127.0.0.1 port, runs LoadGen (warmup, then a fixed measured
window, every loop bounded in time and count), reads the server's CPU time from /proc, and stops
the server. Rounds alternate the order (Weft first, then Infinispan first, ...). A target that
fails is reported and the other one goes on.

The warmup is long by default because the Infinispan server is a fresh JVM per cell: measured
at 16 threads here, its throughput after a 2 s warmup was about a third of that after 20 s.

With --secure both servers speak TLS only, with the same certificate (interop/tls_files.py: a
test CA and a certificate for localhost and 127.0.0.1), and require SASL SCRAM-SHA-512 as user
`bench` with a random password: Weft through [server.tls] and a users file made with `weft user
create bench --groups application` (LoadGen reads and writes entries and creates no cache, so the
`application` role suffices), Infinispan through its endpoint's ssl and sasl builders (no
authorization: an authenticated user may do anything). LoadGen trusts the test CA, sends the
server name `localhost` and authenticates with SCRAM-SHA-512. Its matrix defaults to 1 and 16
threads x 100-byte values:

    python3 bench/hotrod_vs_infinispan.py --secure --json /tmp/hotrod-tls.json

Options: --rounds R (3), --seconds S (10), --warmup-seconds W (15), --quick (1 round, 5 s + 3 s),
--threads 1,4,16, --value-bytes 100,1024, --keys K, --targets weft,infinispan, --secure,
--json FILE. The jar is built with `mvn -q -B package` in bench/hotrod when missing (--rebuild to
force). WEFT_BIN names the Weft binary (default target/release/weft).
"""

import argparse
import json
import os
import queue
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "interop"))
from tls_files import make as make_tls_files  # noqa: E402
from weft_process import WEFT_BIN, free_port, stop, wait_for_port  # noqa: E402

HOTROD = BENCH / "hotrod"
JAR = HOTROD / "target" / "hotrod-bench.jar"
# LoadGen built against each Java client: 15.0 (a pool of connections, one request in flight
# on each) and the rewritten 15.2 (one pipelined connection per server).
LOADGEN_JARS = {"15.0": JAR, "15.2": HOTROD / "loadgen-15.2" / "target" / "hotrod-loadgen-15.2.jar"}
CLK_TCK = os.sysconf("SC_CLK_TCK")
WINDOW_START = "# measured window: start"
WINDOW_END = "# measured window: end"
WEFT_CONFIG = "[caches.bench]\n"  # no encoding: values kept as the client's protostream bytes
SERVER_START_TIMEOUT_S = 90.0
GIVE_UP_AFTER_FAILURES = 2  # a target that failed this many cells in a row and never ran is skipped
# --secure: the user LoadGen authenticates as. LoadGen pings the cache (needs no permission),
# preloads it with putAll and PUTs (WRITE) and GETs (READ): Weft's `application` role grants those
# and more; LoadGen creates no cache over Hot Rod, so it needs neither `deployer` nor `admin`.
SECURE_USER = "bench"
SECURE_GROUPS = "application"
SECURE_MECHANISM = "SCRAM-SHA-512"
USER_CREATE_TIMEOUT_S = 60.0


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()  # fields from the 3rd (state) on
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def machine_busy(seconds: float = 1.0) -> float:
    """Share of the machine's CPU time (all cores) spent not idle over the next `seconds`."""
    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return sum(fields), fields[3] + fields[4]  # idle + iowait
    total0, idle0 = sample()
    time.sleep(seconds)
    total1, idle1 = sample()
    return round(1 - (idle1 - idle0) / max(1, total1 - total0), 3)


def tail(path: Path, limit: int = 1500) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return text[-limit:].strip()


class Server:
    """A server process on a loopback port, its output in a log file, stopped with SIGTERM."""

    def __init__(self, name: str, process: subprocess.Popen, port: int, log: Path):
        self.name, self.process, self.port, self.log = name, process, port, log

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.process.returncode}: {tail(self.log)}")

    def stop(self) -> int:
        return stop(self.process)


class Secure:
    """What --secure adds: Weft's configuration, and the options of InfinispanServer and LoadGen."""

    def __init__(self, weft_config: Path, infinispan_argv: list[str], loadgen_argv: list[str]):
        self.weft_config, self.infinispan_argv, self.loadgen_argv = weft_config, infinispan_argv, loadgen_argv


def make_secure(workdir: Path, weft_user: bool = True) -> Secure:
    """Writes into `workdir/tls` the certificates of interop/tls_files.py, a random password in a
    file only its owner reads (so that it is on no command line), and, with `weft_user`, a Weft
    users file with SECURE_USER made by `weft user create`, plus a Weft configuration serving TLS
    and requiring those users, with the `bench` cache."""
    files = workdir / "tls"
    config = make_tls_files(files)
    password = secrets.token_urlsafe(24)
    password_file = files / "password"
    password_file.touch(mode=0o600)
    password_file.write_text(password)
    if weft_user:
        if not WEFT_BIN.exists():
            raise RuntimeError(f"{WEFT_BIN} missing: run `cargo build --release -p weft-server`")
        created = subprocess.run(
            [str(WEFT_BIN), "user", "create", SECURE_USER, "--groups", SECURE_GROUPS,
             "--users-file", str(files / "users.toml")],
            env={**os.environ, "WEFT_USER_PASSWORD": password}, capture_output=True, text=True,
            stdin=subprocess.DEVNULL, timeout=USER_CREATE_TIMEOUT_S)
        if created.returncode != 0:
            raise RuntimeError(f"weft user create exited with {created.returncode}: {created.stderr.strip()}")
    # Paths in the configuration are relative to its directory: the certificates and users file.
    config.write_text(config.read_text() + '\n[security]\nusers-file = "users.toml"\n\n' + WEFT_CONFIG)
    return Secure(
        config,
        ["--tls-cert", str(files / "server.pem"), "--tls-key", str(files / "server.key"),
         "--user", SECURE_USER, "--password-file", str(password_file)],
        ["--tls-ca", str(files / "ca.pem"), "--sni-host", "localhost", "--sasl-mechanism", SECURE_MECHANISM,
         "--user", SECURE_USER, "--password-file", str(password_file)])


def start_weft(config: Path, log: Path) -> Server:
    if not WEFT_BIN.exists():
        raise RuntimeError(f"{WEFT_BIN} missing: run `cargo build --release -p weft-server`")
    port = free_port()
    argv = [str(WEFT_BIN), "server", "--bind", f"127.0.0.1:{port}", "--config", str(config)]
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    server = Server("weft", process, port, log)
    try:
        try:
            wait_for_port(port, "weft", timeout_s=SERVER_START_TIMEOUT_S, process=process)
        except RuntimeError:
            server.check_alive()  # it exited: say why, from its log
            raise
        server.check_alive()
    except BaseException:
        server.stop()
        raise
    return server


def start_infinispan(log: Path, extra_argv: tuple[str, ...] | list[str] = ()) -> Server:
    """`extra_argv` goes after the port: `["--sifs", DIR]` gives both caches a SoftIndexFileStore,
    `Secure.infinispan_argv` TLS and SCRAM."""
    port = free_port()
    argv = ["java", "-Xmx2g", "-cp", str(JAR), "weft.bench.InfinispanServer", str(port), *extra_argv]
    with log.open("wb") as err:
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err,
                                   stdin=subprocess.DEVNULL, text=True)
    server = Server("infinispan", process, port, log)
    try:
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in process.stdout] + [lines.put(None)],
                         daemon=True).start()
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"infinispan not READY within {SERVER_START_TIMEOUT_S:.0f}s")
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                process.wait(timeout=5)
                raise RuntimeError(f"infinispan exited with {process.returncode}: {tail(log)}")
            if line.strip() == f"READY {port}":
                return server
    except BaseException:
        server.stop()
        raise


def run_loadgen(server: Server, threads: int, value_bytes: int, args, client: str = "15.0",
                extra_argv: tuple[str, ...] | list[str] = ()) -> dict:
    """Runs LoadGen against the server; returns its JSON plus the server's CPU seconds over the
    whole LoadGen run (preload, warmup, measure) and over the measured window alone.
    `extra_argv` adds LoadGen options (e.g. `["--preload", "false"]`)."""
    argv = ["java", "-Xmx1g", "-cp", str(LOADGEN_JARS[client]), "weft.bench.LoadGen",
            "--host", "127.0.0.1", "--port", str(server.port), "--cache", "bench",
            "--threads", str(threads), "--seconds", str(args.seconds),
            "--warmup-seconds", str(args.warmup_seconds), "--value-bytes", str(value_bytes),
            "--keys", str(args.keys), "--get-ratio", str(args.get_ratio),
            "--max-ops", str(args.max_ops), *extra_argv]
    pid = server.process.pid
    # JVM start + preload + warmup + measure + the client's timeouts on a failing server.
    timeout_s = args.warmup_seconds + args.seconds + 180
    cpu_start = cpu_seconds(pid)
    window: dict[str, float] = {}
    stderr_lines: list[str] = []
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, text=True)

    def read_stderr() -> None:
        for line in process.stderr:
            line = line.rstrip("\n")
            marker = {WINDOW_START: "start", WINDOW_END: "end"}.get(line)
            if marker is None:
                stderr_lines.append(line)
                continue
            try:
                window[marker] = cpu_seconds(pid)
            except OSError:
                pass  # the server is gone; the run reports it

    stdout_chunks: list[str] = []
    readers = [threading.Thread(target=read_stderr, daemon=True),
               threading.Thread(target=lambda: stdout_chunks.append(process.stdout.read()), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        process.wait(timeout=timeout_s)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for reader in readers:
            reader.join(timeout=5)
    stdout = "".join(stdout_chunks)
    cpu_end = cpu_seconds(pid) if server.process.poll() is None else None
    # LoadGen's one-line "fatal:"/"error:" diagnostics first, then the last lines of whatever else.
    flagged = [line for line in stderr_lines if line.startswith(("fatal:", "error:"))]
    messages = "\n".join(flagged[:6] or stderr_lines[-10:])
    result = None
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            result = json.loads(line)
            break
    if process.returncode != 0 or result is None:
        raise RuntimeError(f"LoadGen exited with {process.returncode}: {messages or stdout[-500:]}")
    result["server_cpu_seconds"] = round(cpu_end - cpu_start, 3) if cpu_end is not None else None
    result["server_cpu_window_seconds"] = (round(window["end"] - window["start"], 3)
                                           if "start" in window and "end" in window else None)
    if messages:
        result["client_messages"] = messages
    if server.process.poll() is not None:
        result["server_died"] = f"exited with {server.process.returncode}: {tail(server.log, 500)}"
    return result


def interrupt(*_) -> None:
    raise KeyboardInterrupt


def ensure_jar(rebuild: bool) -> None:
    """Builds each jar that is missing or older than the Java sources or its pom (or all with
    `rebuild`)."""
    sources = list((HOTROD / "src").rglob("*.java"))
    for jar in [JAR, LOADGEN_JARS["15.2"]]:
        project = jar.parent.parent
        newest = max(path.stat().st_mtime for path in [*sources, project / "pom.xml"])
        if jar.exists() and jar.stat().st_mtime >= newest and not rebuild:
            continue
        print(f"building {jar.relative_to(BENCH.parent)} (mvn -q -B package)", file=sys.stderr, flush=True)
        started = time.monotonic()
        # Maven's output (even with -q, colour resets) goes to stderr: stdout is the table.
        subprocess.run(["mvn", "-q", "-B", "-Dstyle.color=never", "package"], cwd=project, check=True,
                       timeout=1200, stdin=subprocess.DEVNULL, stdout=sys.stderr)
        print(f"built in {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True)


def fmt_rate(run: dict | None) -> str:
    return f"{run['ops_per_sec']:,.0f}" if run else "—"


def fmt(run: dict | None, key: str, digits: int = 1) -> str:
    if not run or run.get(key) is None:
        return "—"
    return f"{run[key]:.{digits}f}"


def fmt_server_us_per_op(run: dict | None) -> str:
    """The server's CPU time over the measured window per operation that succeeded in it."""
    if not run or run.get("server_cpu_window_seconds") is None or not run.get("ops"):
        return "—"
    return f"{run['server_cpu_window_seconds'] * 1e6 / run['ops']:.1f}"


def best_runs(results: list[dict]) -> dict:
    best: dict = {}
    for record in results:
        if "result" not in record:
            continue
        cell = (record.get("client", "15.0"), record["threads"], record["value_bytes"], record["target"])
        if cell not in best or record["result"]["ops_per_sec"] > best[cell]["ops_per_sec"]:
            best[cell] = record["result"]
    return best


def table(results: list[dict], threads_list, sizes, rounds: int, clients=("15.0",), secure: bool = False) -> str:
    best = best_runs(results)
    lines = [
        "| client | threads | value B | Weft ops/s | Infinispan ops/s | Weft/ISPN | Weft p99 µs | ISPN p99 µs "
        "| client CPU s Weft | client CPU s ISPN | server CPU s Weft | server CPU s ISPN "
        "| server CPU µs/op Weft | server CPU µs/op ISPN |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for client in clients:
      for threads in threads_list:
        for size in sizes:
            w = best.get((client, threads, size, "weft"))
            i = best.get((client, threads, size, "infinispan"))
            ratio = f"{w['ops_per_sec'] / i['ops_per_sec']:.2f}" if w and i and i["ops_per_sec"] else "—"
            lines.append(
                f"| {client} | {threads} | {size} | {fmt_rate(w)} | {fmt_rate(i)} | {ratio} | {fmt(w, 'p99_us')} "
                f"| {fmt(i, 'p99_us')} | {fmt(w, 'client_cpu_seconds', 2)} | {fmt(i, 'client_cpu_seconds', 2)} "
                f"| {fmt(w, 'server_cpu_window_seconds', 2)} | {fmt(i, 'server_cpu_window_seconds', 2)} "
                f"| {fmt_server_us_per_op(w)} | {fmt_server_us_per_op(i)} |")
    lines.append("")
    if secure:
        lines.append(f"Both servers: TLS (same certificate) and SASL {SECURE_MECHANISM}; "
                     "Weft authorizes by role (`application`), Infinispan without authorization.")
    lines.append(f"Best of {rounds} round(s) by ops/s; p99 and CPU are that run's. CPU seconds are "
                 "over the measured window (client: LoadGen JVM; server: /proc utime+stime); server "
                 "µs/op is that window's server CPU per operation that succeeded in it. "
                 "Whole-run server CPU (preload + warmup + window) is `server_cpu_seconds` in the JSON.")
    failures = [r for r in results if "error" in r]
    errors = [r for r in results if r.get("result", {}).get("errors") or r.get("result", {}).get("get_misses")
              or r.get("result", {}).get("server_died")]
    for r in failures:
        lines.append(f"- {r['target']} threads={r['threads']} value={r['value_bytes']} "
                     f"round {r['round']}: FAILED: {r['error'].splitlines()[0][:300]}")
    for r in errors:
        lines.append(f"- {r['target']} threads={r['threads']} value={r['value_bytes']} round {r['round']}: "
                     f"{r['result']['errors']} errors, {r['result'].get('get_misses', 0)} GET misses"
                     + (f", server {r['result']['server_died'][:200]}" if r["result"].get("server_died") else ""))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup-seconds", type=float, default=15.0)
    parser.add_argument("--quick", action="store_true",
                        help="1 round, 3 s measured after 5 s warmup (a smoke test: a JVM server is not warm yet)")
    parser.add_argument("--threads", help="client threads, comma-separated (1,4,16; with --secure 1,16)")
    parser.add_argument("--value-bytes", help="value sizes, comma-separated (100,1024; with --secure 100)")
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--get-ratio", type=float, default=0.8)
    parser.add_argument("--max-ops", type=int, default=100_000_000,
                        help="most operations per measured window (split across threads)")
    parser.add_argument("--targets", default="weft,infinispan")
    parser.add_argument("--clients", default="15.0,15.2",
                        help="Java client versions LoadGen runs with (15.0 pooled, 15.2 pipelined)")
    parser.add_argument("--json", type=Path, help="write the raw results here")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the jar even if present")
    parser.add_argument("--secure", action="store_true",
                        help=f"TLS and SASL {SECURE_MECHANISM} on both servers (see the module's doc)")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.seconds, args.warmup_seconds = 1, 3.0, 5.0
    threads_list = [int(t) for t in (args.threads or ("1,16" if args.secure else "1,4,16")).split(",")]
    sizes = [int(s) for s in (args.value_bytes or ("100" if args.secure else "100,1024")).split(",")]
    targets = [t.strip() for t in args.targets.split(",")]
    clients = [c.strip() for c in args.clients.split(",")]
    if not set(clients) <= set(LOADGEN_JARS):
        parser.error("--clients takes 15.0 and/or 15.2")
    if not set(targets) <= {"weft", "infinispan"}:
        parser.error("--targets takes weft and/or infinispan")

    # SIGTERM unwinds like Ctrl-C, so the finally blocks stop whatever server is running.
    signal.signal(signal.SIGTERM, interrupt)
    ensure_jar(args.rebuild)
    workdir = Path(tempfile.mkdtemp(prefix="weft-hotrod-bench-"))
    secure = make_secure(workdir, weft_user="weft" in targets) if args.secure else None
    if secure:
        config = secure.weft_config
    else:
        config = workdir / "weft.toml"
        config.write_text(WEFT_CONFIG)

    results: list[dict] = []
    failures_in_a_row = {t: 0 for t in targets}
    succeeded = {t: False for t in targets}

    def save() -> None:
        if args.json:
            args.json.write_text(json.dumps({
                "settings": {"rounds": args.rounds, "seconds": args.seconds,
                             "warmup_seconds": args.warmup_seconds, "keys": args.keys,
                             "get_ratio": args.get_ratio, "threads": threads_list,
                             "value_bytes": sizes, "clients": clients, "secure": args.secure,
                             "sasl_mechanism": SECURE_MECHANISM if args.secure else None,
                             "weft_bin": str(WEFT_BIN),
                             "jars": {c: str(LOADGEN_JARS[c]) for c in clients}},
                "runs": results}, indent=1) + "\n")

    print(f"Hot Rod{f' over TLS with {SECURE_MECHANISM}' if secure else ''} "
          f"{int(args.get_ratio * 100)}/{100 - int(args.get_ratio * 100)} GET/PUT, "
          f"{args.keys} keys, {args.warmup_seconds:g} s warmup + {args.seconds:g} s measured, "
          f"{args.rounds} round(s); logs in {workdir}", file=sys.stderr, flush=True)
    busy = machine_busy()
    if busy > 0.1:
        print(f"warning: the machine's CPUs are {busy:.0%} busy before starting: other work will "
              "skew the numbers (each run records cpu_busy_before)", file=sys.stderr, flush=True)
    try:
        for round_no in range(1, args.rounds + 1):
            order = targets if round_no % 2 == 1 else list(reversed(targets))
            for client in clients:
              for threads in threads_list:
                  for size in sizes:
                      for target in order:
                          # Other work on this 2-core machine skews a run: note how busy it was
                          # just before (no server or client of ours running then).
                          record = {"round": round_no, "target": target, "client": client, "threads": threads,
                                    "value_bytes": size, "cpu_busy_before": machine_busy()}
                          if (not succeeded[target]
                                  and failures_in_a_row[target] >= GIVE_UP_AFTER_FAILURES):
                              record["error"] = "skipped: failed every earlier cell"
                              results.append(record)
                              continue
                          log = workdir / f"{target}-c{client}-r{round_no}-t{threads}-v{size}.log"
                          server = None
                          try:
                              if target == "weft":
                                  # Another build may replace the binary between cells: say which ran.
                                  binary = WEFT_BIN.stat() if WEFT_BIN.exists() else None
                                  record["weft_bin_mtime"] = (time.strftime(
                                      "%Y-%m-%dT%H:%M:%S", time.localtime(binary.st_mtime)) if binary else None)
                                  server = start_weft(config, log)
                              else:
                                  server = start_infinispan(log, secure.infinispan_argv if secure else ())
                              record["result"] = run_loadgen(server, threads, size, args, client,
                                                             secure.loadgen_argv if secure else ())
                              failures_in_a_row[target] = 0
                              succeeded[target] = True
                          except (RuntimeError, OSError, TimeoutError, ValueError,
                                  subprocess.SubprocessError) as e:
                              record["error"] = f"{type(e).__name__}: {e}"
                              failures_in_a_row[target] += 1
                          finally:
                              if server is not None:
                                  code = server.stop()
                                  record["server_exit"] = code
                          results.append(record)
                          save()
                          r = record.get("result")
                          summary = (f"{r['ops_per_sec']:>10,.0f} ops/s  p99 {r['p99_us']:>8.1f} µs  "
                                     f"errors {r['errors']}  client CPU {r['client_cpu_seconds']:.2f}s  "
                                     f"server CPU {r['server_cpu_window_seconds']}s"
                                     if r else f"FAILED {record['error'].splitlines()[0][:200]}")
                          print(f"round {round_no} client {client} {target:<10} threads {threads:>2} value {size:>5}: "
                                f"{summary}  (busy before {record['cpu_busy_before']:.0%})",
                                file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        print("interrupted: reporting what ran", file=sys.stderr)
    finally:
        save()
    print(table(results, threads_list, sizes, args.rounds, clients, secure=args.secure))
    return 0 if any("result" in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
