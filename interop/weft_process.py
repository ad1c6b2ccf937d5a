"""Starting and stopping the processes the interop suites drive: a release `weft server` and,
for differential tests, a real redis-server — each on a free loopback port."""

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


def wait_for_port(port: int, name: str = "weft", timeout_s: float = 30.0,
                  process: subprocess.Popen | None = None) -> None:
    """Waits until something accepts connections on the port; with `process`, gives up as soon
    as that process has exited (e.g. it rejected its configuration)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"{name} did not listen on {port} within {timeout_s}s")


def stop(process: subprocess.Popen) -> int:
    """SIGTERM the process we started, by its handle; SIGKILL if it hangs. Returns its exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
    return process.returncode


def start_weft(config_path: Path | None = None) -> tuple[subprocess.Popen, int]:
    """A release server on a free port; raises if the binary is missing."""
    if not WEFT_BIN.exists():
        raise FileNotFoundError(f"{WEFT_BIN} missing: run `cargo build --release -p weft-server`")
    port = free_port()
    argv = [str(WEFT_BIN), "server", "--bind", f"127.0.0.1:{port}"]
    if config_path is not None:
        argv += ["--config", str(config_path)]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    wait_for_port(port)
    return process, port


def stop_weft_cleanly(process: subprocess.Popen) -> None:
    """Stops the server with SIGTERM and asserts it exited 0 without a panic."""
    code = stop(process)
    output = process.stdout.read().decode(errors="replace") if process.stdout else ""
    assert code == 0, f"weft exited with {code} after SIGTERM:\n{output}"
    assert "panicked" not in output, output
