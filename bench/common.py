"""Shared helpers for Weft's load benchmarks: free ports, starting and stopping servers,
reading a process's resident memory. Every load is bounded in count and time and targets
only 127.0.0.1."""

import os
import subprocess
import sys
from pathlib import Path

# Ports, readiness and stopping are shared with the interop suites.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "interop"))
from weft_process import WEFT_BIN, free_port, stop, wait_for_port  # noqa: E402


class Server:
    """A server process on a loopback port, stopped with SIGTERM."""

    def __init__(self, name: str, argv: list[str], port: int):
        self.name, self.port = name, port
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(port, name)

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def stop(self) -> None:
        stop(self.process)


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


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU the processes used so far (from /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / ticks
