"""Shared helpers for Weft's load benchmarks: free ports, starting and stopping servers,
reading a process's resident memory. Every load is bounded in count and time and targets
only 127.0.0.1."""

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WEFT_BIN = Path(os.environ.get("WEFT_BIN", ROOT / "target" / "release" / "weft"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout_s}s")


class Server:
    """A server process on a loopback port, stopped with SIGTERM."""

    def __init__(self, name: str, argv: list[str], port: int):
        self.name, self.port = name, port
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_for_port(port)

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_weft(extra: list[str] | None = None) -> Server:
    if not WEFT_BIN.exists():
        raise SystemExit(f"{WEFT_BIN} not found: run `cargo build --release -p weft-server` first")
    port = free_port()
    env_argv = [str(WEFT_BIN), "server", "--bind", f"127.0.0.1:{port}", *(extra or [])]
    return Server("weft", env_argv, port)


def start_redis() -> Server:
    port = free_port()
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--daemonize", "no", "--protected-mode", "yes",
            "--logfile", "/dev/null"]
    return Server("redis", argv, port)
