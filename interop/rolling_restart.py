#!/usr/bin/env python3
"""A rolling restart under load, as an operator or Kubernetes does it, checked from the
applications' side.

    python3 interop/rolling_restart.py [--restarts N] [--wait ready|stable] [--java PROFILE]

Starts three release `weft server` nodes (distributed caches, owners = 2), then runs load
through every node with two real clients at once:

- redis-py's cluster-aware client (`RedisCluster`, its default retries): threads that SET
  keys of their own (overwrites), INCR counters of their own and GET their keys back;
- with `--java PROFILE`, the official Hot Rod Java client (Maven profile `client-15.0` or
  `client-15.2`, its default retries, every node in its server list): RollingRestartTest,
  16 threads, 80/20 reads and writes over 10,000 keys.

Meanwhile it restarts the nodes one by one, N times over (a *restart* is one pass over the
three nodes): SIGTERM, the node must exit 0; started again `--delay` seconds later on the
same ports under the same name; then, before the next node, it waits until the restarted
node reports ready (`GET /rest/v2/container/health/ready` is 200, as a readiness probe
reads) or, with `--wait stable`, until every node reports every cache stable with all
members.

Fails (exit 1) if any client operation failed, any read saw other than the last write
acknowledged for its key, any INCR answered other than one more than the last, any write
acknowledged was lost, or a node did not stop cleanly. Prints what it measured.
"""

import argparse
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from weft_process import WEFT_BIN, free_port  # noqa: E402
from with_weft import DrainedOutput  # noqa: E402
from with_weft_cluster import free_udp_and_tcp_port, wait_until_formed  # noqa: E402

HERE = Path(__file__).resolve().parent

CONFIG = """
[caches.default]              # RESP: Redis' slots as segments, so redis-py routes as the cluster does
mode = "distributed"
owners = 2
segments = 64
key-partitioner = "redis-slots"
[caches.dist]                 # Hot Rod: ProtoStream keys, the bytes the Java client hashes
mode = "distributed"
owners = 2
"""


class Node:
    def __init__(self, index: int, seeds: str, config: Path, secret: str, log_dir: Path):
        self.index = index
        self.name = f"node-{index}"
        self.port = free_port()
        self.cluster_port = free_udp_and_tcp_port()
        self.seeds = seeds
        self.config = config
        self.secret = secret
        self.log_dir = log_dir
        self.process: subprocess.Popen | None = None
        self.output: DrainedOutput | None = None
        self.starts = 0

    def start(self) -> None:
        argv = [str(WEFT_BIN), "server", "--bind", f"127.0.0.1:{self.port}",
                "--cluster-listen", f"127.0.0.1:{self.cluster_port}", "--node-name", self.name,
                "--join", self.seeds, "--config", str(self.config)]
        env = dict(os.environ, WEFT_CLUSTER_SECRET=self.secret)
        self.starts += 1
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        self.output = DrainedOutput(self.process.stdout)

    def keep_log(self) -> None:
        if self.output is not None:
            (self.log_dir / f"{self.name}.{self.starts}.log").write_text(self.output.text())

    def stop(self, timeout_s: float = 30.0) -> tuple[int | None, float]:
        """SIGTERM; returns the exit code (None if it had to be killed) and how long it took."""
        assert self.process is not None
        started = time.monotonic()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
            code = None
        took = time.monotonic() - started
        self.keep_log()
        return code, took

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.port}/rest/v2/container/health/ready", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, timeout_s: float = 90.0) -> float:
        started = time.monotonic()
        deadline = started + timeout_s
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode} while starting")
            if self.ready():
                return time.monotonic() - started
            time.sleep(0.1)
        raise TimeoutError(f"{self.name} was not ready within {timeout_s}s")


class RespLoad:
    """redis-py cluster clients, each thread with keys and a counter of its own."""

    KEYS = 200

    def __init__(self, ports: list[int], threads: int, retries: int | None = None):
        from redis.cluster import ClusterNode, RedisCluster
        # A client per thread, as an application's workers each hold one: redis-py's cluster
        # client rebuilds its node table on a connection error, closing connections other
        # threads are using.
        extra = {} if retries is None else {"cluster_error_retry_attempts": retries}
        self.clients = [RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports],
                                     decode_responses=True, **extra) for _ in range(threads)]
        self.client = self.clients[0]
        self.threads = threads
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.operations = 0
        self.failures: list[str] = []
        self.stale: list[str] = []
        self.counter_errors: list[str] = []
        # INCRs that failed at the client and had run: what a client's retry would repeat.
        self.applied_unanswered: list[str] = []
        self.values: list[dict[str, str]] = [{} for _ in range(threads)]
        self.counters: list[int] = [0] * threads
        self.workers = [threading.Thread(target=self.work, args=(t,), daemon=True) for t in range(threads)]

    def start(self) -> None:
        for worker in self.workers:
            worker.start()

    def finish(self) -> None:
        self.stop.set()
        for worker in self.workers:
            worker.join(timeout=120)

    def work(self, thread: int) -> None:
        rng = random.Random(thread)
        client = self.clients[thread]
        mine = self.values[thread]
        # A write that failed may or may not have run: the key's value, or the counter, is
        # then either until the next acknowledged write.
        maybe: dict[str, str] = {}
        counter_unsure = False
        counter = f"rolling:{thread}:counter"
        seq = 0
        done = 0
        while not self.stop.is_set():
            key = f"rolling:{thread}:{rng.randrange(self.KEYS)}"
            roll = rng.random()
            op = "SET" if roll < 0.35 else "INCR" if roll < 0.65 else "GET"
            try:
                if op == "SET":
                    seq += 1
                    value = f"{thread}:{seq}"
                    maybe[key] = value
                    client.set(key, value)
                    mine[key] = value
                    del maybe[key]
                elif op == "INCR":
                    got = client.incr(counter)
                    expected = self.counters[thread] + 1
                    if counter_unsure and got == expected + 1:
                        with self.lock:
                            self.applied_unanswered.append(f"{counter}: {got}")
                    elif got != expected:
                        with self.lock:
                            self.counter_errors.append(f"{counter}: INCR answered {got}, expected {expected}")
                    self.counters[thread] = got
                    counter_unsure = False
                else:
                    got = client.get(key)
                    if got != mine.get(key) and got != maybe.get(key):
                        with self.lock:
                            self.stale.append(f"{key}: read {got}, last acknowledged {mine.get(key)}")
                done += 1
            except Exception as error:  # noqa: BLE001 - every failure the application sees counts
                counter_unsure |= op == "INCR"
                with self.lock:
                    self.failures.append(f"{op} {key}: {type(error).__name__}: {error}")
        with self.lock:
            self.operations += done

    def verify(self) -> list[str]:
        lost = []
        for thread, mine in enumerate(self.values):
            for key, value in mine.items():
                got = self.client.get(key)
                if got != value:
                    lost.append(f"{key}: read {got}, last acknowledged {value}")
            counter = f"rolling:{thread}:counter"
            got = int(self.client.get(counter) or 0)
            if got != self.counters[thread]:
                lost.append(f"{counter}: {got}, last INCR answered {self.counters[thread]}")
        return lost


def java_load(profile: str, servers: str, control: Path) -> subprocess.Popen:
    """RollingRestartTest in the background (compiled first, so that it starts at once)."""
    java_dir = HERE / "hotrod-java"
    mvn = ["mvn", "-q", "-B", "-Dstyle.color=never", f"-P{profile}"]
    compiled = subprocess.run(mvn + ["test-compile"], cwd=java_dir, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
    if compiled.returncode != 0:
        print(compiled.stdout.decode(errors="replace")[-6000:])
        raise RuntimeError(f"the Java load did not compile (mvn exit {compiled.returncode})")
    env = dict(os.environ, WEFT_SERVERS=servers, WEFT_ROLLING_CONTROL=str(control))
    return subprocess.Popen(
        mvn + ["-Dtest=RollingRestartTest", "-Dsurefire.failIfNoSpecifiedTests=false", "surefire:test"],
        cwd=java_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def wait_for_file(path: Path, process: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if process.poll() is not None:
            raise RuntimeError(f"the Java load exited with {process.returncode} before it started")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the Java load did not start within {timeout_s}s")
        time.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--restarts", type=int, default=1, help="passes over the three nodes (default 1)")
    parser.add_argument("--delay", type=float, default=2.0, help="seconds between a node's exit and its start")
    parser.add_argument("--wait", choices=["ready", "stable"], default="ready",
                        help="before the next node: the restarted one ready, or every cache stable")
    parser.add_argument("--resp-threads", type=int, default=8)
    parser.add_argument("--resp-retries", type=int,
                        help="redis-py's cluster_error_retry_attempts (default: its own, 3); 0 shows what retries hide")
    parser.add_argument("--java", metavar="PROFILE", help="also run the Hot Rod Java client (client-15.0, client-15.2)")
    options = parser.parse_args()
    if not WEFT_BIN.exists():
        sys.exit(f"{WEFT_BIN} missing: run `cargo build --release -p weft-server`")

    work = Path(tempfile.mkdtemp(prefix="weft-rolling-"))
    config = work / "weft.toml"
    config.write_text(CONFIG)
    secret = secrets.token_hex(16)
    # Ports first (every node's seeds name all three), then the processes.
    nodes = [Node(i, "", config, secret, work) for i in range(3)]
    seeds = ",".join(f"127.0.0.1:{n.cluster_port}" for n in nodes)
    for node in nodes:
        node.seeds = seeds
    problems: list[str] = []
    java: subprocess.Popen | None = None
    java_output = ""
    resp: RespLoad | None = None
    stop_times: list[float] = []
    ready_times: list[float] = []
    began = time.monotonic()
    try:
        for node in nodes:
            node.start()
        wait_until_formed([n.port for n in nodes])
        servers = ";".join(f"127.0.0.1:{n.port}" for n in nodes)
        control = work / "control"
        control.mkdir()
        if options.java:
            java = java_load(options.java, servers, control)
            wait_for_file(control / "started", java, timeout_s=300)
        resp = RespLoad([n.port for n in nodes], options.resp_threads, options.resp_retries)
        resp.start()
        time.sleep(2)
        for restart in range(options.restarts):
            for node in nodes:
                code, took = node.stop()
                stop_times.append(took)
                if code != 0:
                    problems.append(f"{node.name} exited with {code} after SIGTERM (restart {restart + 1})")
                time.sleep(options.delay)
                node.start()
                ready_times.append(node.wait_ready())
                if options.wait == "stable":
                    wait_until_formed([n.port for n in nodes], timeout_s=120)
            print(f"rolling_restart: pass {restart + 1} of {options.restarts} done "
                  f"({time.monotonic() - began:.0f}s)", flush=True)
        time.sleep(2)
    except (OSError, TimeoutError, RuntimeError, subprocess.CalledProcessError) as error:
        problems.append(f"harness: {error}")
    finally:
        if resp is not None:
            resp.finish()
        (work / "control").mkdir(exist_ok=True)
        (work / "control" / "stop").write_text("")
        if java is not None:
            try:
                java_output = java.communicate(timeout=300)[0].decode(errors="replace")
            except subprocess.TimeoutExpired:
                java.kill()
                java_output = java.communicate()[0].decode(errors="replace")
            if java.returncode != 0:
                problems.append(f"the Hot Rod Java load failed (exit {java.returncode})")
        lost = []
        if resp is not None and not any(p.startswith("harness") for p in problems):
            try:
                lost = resp.verify()
            except Exception as error:  # noqa: BLE001
                problems.append(f"verification failed: {error}")
        for node in nodes:
            if node.process is not None and node.process.poll() is None:
                code, _ = node.stop()
                if code != 0:
                    problems.append(f"{node.name} exited with {code} at the end")
            output = node.output.text() if node.output else ""
            if "panicked" in output:
                problems.append(f"{node.name} panicked")

    if resp is not None:
        print(f"rolling restart, redis-py {options.resp_threads} threads: {resp.operations} operations, "
              f"{len(resp.failures)} failed, {len(resp.stale)} stale reads, "
              f"{len(resp.counter_errors)} INCR answers out of sequence, {len(lost)} lost; "
              f"{len(resp.applied_unanswered)} failed INCRs had run")
        kinds: dict[str, int] = {}
        for failure in resp.failures:
            op, _, rest = failure.partition(" ")
            kind = f"{op} {rest.split(': ', 1)[-1][:90]}"
            kinds[kind] = kinds.get(kind, 0) + 1
        for kind, count in sorted(kinds.items(), key=lambda item: -item[1]):
            print(f"  {count:6d} × {kind}")
        for label, items in (("failed", resp.failures), ("stale", resp.stale),
                             ("INCR out of sequence", resp.counter_errors), ("lost", lost)):
            if items:
                problems.append(f"redis-py: {len(items)} {label}, e.g. {items[:5]}")
    if java_output:
        summary = work / "control" / "java-summary"
        if summary.exists():
            print(summary.read_text().strip())
        if java is not None and java.returncode != 0:
            print(java_output[-6000:])
    if stop_times:
        print(f"rolling restart: {len(stop_times)} stops by SIGTERM, each {min(stop_times):.2f}-{max(stop_times):.2f}s; "
              f"ready {min(ready_times, default=0):.1f}-{max(ready_times, default=0):.1f}s after start; "
              f"{time.monotonic() - began:.0f}s in all")
    if problems:
        for problem in problems:
            print(f"rolling_restart: {problem}", file=sys.stderr)
        print(f"rolling_restart: node logs kept in {work}", file=sys.stderr)
        return 1
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
