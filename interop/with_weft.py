#!/usr/bin/env python3
"""Runs one command against a release `weft server` started for it.

    python3 interop/with_weft.py --config FILE -- CMD ARGS...

Starts the server on a free loopback port (interop/weft_process.py), runs CMD with WEFT_PORT=<port>
in its environment and every literal `{port}` in its arguments replaced by the port, then stops the
server with SIGTERM. Exits with CMD's exit code; if CMD passed but the server did not stop cleanly
(non-zero exit or a panic), exits 1. The server's output is printed when either fails.
"""

import argparse
import os
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from weft_process import start_weft, stop_weft_cleanly  # noqa: E402


class DrainedOutput:
    """Stands in for the server's stdout pipe: a thread keeps reading it so a chatty server never
    blocks on a full pipe, and read() returns everything once the server has exited, which is what
    stop_weft_cleanly expects of process.stdout."""

    def __init__(self, pipe):
        self._pipe = pipe
        self._chunks: list[bytes] = []
        self._thread = threading.Thread(target=self._drain, name="weft-output", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        for chunk in iter(lambda: self._pipe.read1(1 << 16), b""):
            self._chunks.append(chunk)

    def read(self) -> bytes:
        self._thread.join(timeout=30)
        return self.text().encode()

    def text(self) -> str:
        return b"".join(self._chunks).decode(errors="replace")


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" not in argv:
        sys.exit("usage: with_weft.py [--config FILE] -- CMD [ARGS...]")
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="with_weft.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, help="weft server configuration (TOML)")
    options = parser.parse_args(argv[:split])
    command = argv[split + 1:]
    if not command:
        parser.error("no command after --")
    if options.config is not None and not options.config.is_file():
        parser.error(f"config {options.config} does not exist")
    return options, command


def main(argv: list[str]) -> int:
    options, command = parse(argv)
    process, port = start_weft(options.config)
    output = DrainedOutput(process.stdout)
    process.stdout = output
    command = [arg.replace("{port}", str(port)) for arg in command]
    env = dict(os.environ, WEFT_PORT=str(port))
    print(f"with_weft: weft on 127.0.0.1:{port}, running: {' '.join(command)}", file=sys.stderr, flush=True)

    code = 1
    try:
        code = subprocess.run(command, env=env).returncode
    except FileNotFoundError as error:
        print(f"with_weft: cannot run {command[0]}: {error}", file=sys.stderr)
        code = 127
    finally:
        stopped_cleanly = True
        try:
            stop_weft_cleanly(process)
        except AssertionError as error:
            stopped_cleanly = False
            print(f"with_weft: the server did not stop cleanly: {error}", file=sys.stderr)
        if code != 0 and stopped_cleanly:
            print(f"with_weft: command failed (exit {code}); server output:\n{output.text()}", file=sys.stderr)

    if code < 0:
        code = 128 - code  # killed by a signal, as a shell reports it
    if code == 0 and not stopped_cleanly:
        code = 1
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
