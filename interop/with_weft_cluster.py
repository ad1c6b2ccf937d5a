#!/usr/bin/env python3
"""Runs one command against a cluster of release `weft server` processes started for it.

    python3 interop/with_weft_cluster.py --nodes 3 --config FILE -- CMD ARGS...

Starts N nodes on free loopback ports, each joining the others, and waits until every node
reports every clustered cache stable with all N members (GET /rest/v2/cluster/topology).
Runs CMD with WEFT_PORT (the first node's port), WEFT_SERVERS ("host:port;..." of every
node) and WEFT_PIDS ("pid;..." in the same order) in its environment, and `{port}` in its
arguments replaced by the first node's port; the command may kill nodes. Then stops the nodes
still running with SIGTERM. Exits with CMD's exit code, or 1 if a surviving node did not stop
cleanly; prints the nodes' output when anything failed.
"""

import argparse
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from weft_process import WEFT_BIN, stop, wait_for_port  # noqa: E402
from with_weft import DrainedOutput  # noqa: E402


def free_udp_and_tcp_port() -> int:
    """A port free for both UDP (membership) and TCP (the node-to-node transport)."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.bind(("127.0.0.1", 0))
            port = udp.getsockname()[1]
            with socket.socket() as tcp:
                try:
                    tcp.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
    raise RuntimeError("no port free for both UDP and TCP")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def topology(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/rest/v2/cluster/topology", timeout=5) as response:
        return json.load(response)


def wait_until_formed(ports: list[int], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            reports = [topology(port) for port in ports]
            last = reports
            if all(report["caches"] and all(cache["phase"] == "stable" and len(cache["members"]) == len(ports)
                                            for cache in report["caches"]) for report in reports):
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"the cluster did not form within {timeout_s}s: {last}")


def launch_nodes(nodes: int, config: Path | None, stdout=subprocess.DEVNULL,
                 name: str = "node") -> tuple[list[int], list[subprocess.Popen]]:
    """Starts `nodes` release servers on free loopback ports, each joining the others (the
    output of each goes to `stdout`: DEVNULL, or PIPE to read it); returns their client
    ports and processes. Wait for them with `wait_ready`; stop them with `weft_process.stop`."""
    ports = [free_port() for _ in range(nodes)]
    cluster_ports = [free_udp_and_tcp_port() for _ in range(nodes)]
    seeds = ",".join(f"127.0.0.1:{p}" for p in cluster_ports)
    secret = os.environ.get("WEFT_CLUSTER_SECRET") or secrets.token_hex(16)
    processes = []
    for i, (port, cluster_port) in enumerate(zip(ports, cluster_ports)):
        argv_node = [str(WEFT_BIN), "server", "--bind", f"127.0.0.1:{port}",
                     "--cluster-listen", f"127.0.0.1:{cluster_port}", "--node-name", f"{name}-{i}",
                     "--join", seeds]
        if config is not None:
            argv_node += ["--config", str(config)]
        stderr = subprocess.STDOUT if stdout == subprocess.PIPE else stdout
        # The nodes prove themselves to each other with a shared cluster secret, as a
        # deployment should; one per cluster, so clusters started side by side stay apart.
        env = dict(os.environ, WEFT_CLUSTER_SECRET=secret)
        processes.append(subprocess.Popen(argv_node, stdout=stdout, stderr=stderr, env=env))
    return ports, processes


def wait_ready(ports: list[int], processes: list[subprocess.Popen]) -> None:
    """Waits until every node listens and every clustered cache is stable on all of them."""
    for port, process in zip(ports, processes):
        wait_for_port(port, process=process)
    wait_until_formed(ports)


def main(argv: list[str]) -> int:
    if "--" not in argv:
        sys.exit("usage: with_weft_cluster.py [--nodes N] [--config FILE] -- CMD [ARGS...]")
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="with_weft_cluster.py")
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--config", type=Path)
    options = parser.parse_args(argv[:split])
    command = argv[split + 1:]
    if not WEFT_BIN.exists():
        sys.exit(f"{WEFT_BIN} missing: run `cargo build --release -p weft-server`")

    ports, processes = launch_nodes(options.nodes, options.config, stdout=subprocess.PIPE)
    outputs = [DrainedOutput(process.stdout) for process in processes]
    code = 1
    try:
        wait_ready(ports, processes)
        servers = ";".join(f"127.0.0.1:{p}" for p in ports)
        pids = ";".join(str(p.pid) for p in processes)
        env = dict(os.environ, WEFT_PORT=str(ports[0]), WEFT_SERVERS=servers, WEFT_PIDS=pids)
        command = [arg.replace("{port}", str(ports[0])) for arg in command]
        print(f"with_weft_cluster: {options.nodes} nodes on {servers}, running: {' '.join(command)}",
              file=sys.stderr, flush=True)
        code = subprocess.run(command, env=env).returncode
    except (OSError, TimeoutError, RuntimeError) as error:
        print(f"with_weft_cluster: {error}", file=sys.stderr)
    finally:
        clean = True
        for i, process in enumerate(processes):
            if process.poll() is not None and process.returncode == -9:
                continue  # killed by the command, as intended
            exit_code = stop(process)
            text = outputs[i].text() if exit_code is not None else ""
            if exit_code != 0 or "panicked" in text:
                clean = False
                print(f"with_weft_cluster: node-{i} exited with {exit_code}", file=sys.stderr)
        if code != 0 or not clean:
            for i, output in enumerate(outputs):
                print(f"--- node-{i} output:\n{output.text()}", file=sys.stderr)
    if code < 0:
        code = 128 - code
    if code == 0 and not clean:
        code = 1
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
