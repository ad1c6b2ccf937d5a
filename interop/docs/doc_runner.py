"""Runs the commands of a markdown document as a reader would, and checks what they print.

A document says which of its code blocks are run with an HTML comment on the line before
the block's opening fence (blank lines between them are allowed). The comment is invisible
when the page is rendered. Blocks without one are not run.

    <!-- run -->                 The block runs in the document's bash session: one shell for
                                 the whole page, so `cd`, `export` and variables carry over
                                 from block to block, as in the reader's terminal. The shell
                                 has `set -eo pipefail`: any command that fails fails the test.
                                 Standard input is empty (a `weft cli` shell started without
                                 `-c` reads no command and exits). Options, after a colon:
                                 `timeout=SECONDS` (default 120) bounds the block.
    <!-- run: background -->     A long-running process the reader starts in a terminal of its
                                 own: each command line of the block is one process (one
                                 terminal), started with the session's directory and
                                 environment at that point. The runner waits until it is
                                 ready — a `weft server` line until its client port (`--bind`,
                                 else 11222) accepts connections and, started with `--join`,
                                 until the running nodes agree on the cluster's members (as a
                                 reader's next command comes seconds later); any other line
                                 until its output holds the text of `ready="TEXT"` — then
                                 goes on. At
                                 `<!-- stop -->` or the end of the page it is sent SIGTERM (as
                                 Ctrl-C in its terminal); a `weft server` must then exit 0,
                                 another program 0 or by that signal. One that exits before it
                                 is stopped must have exited 0. `skip="PREFIX"` leaves out the
                                 lines that start with PREFIX.
    <!-- stop -->                Stops every background process started so far;
    <!-- stop: TEXT -->          or only those whose command line contains TEXT. When it
                                 stops a cluster's node, the runner waits until the others
                                 agree that it left.
    <!-- output -->              The ```text block after it is what the last run block printed
                                 on standard output (or, after a `stop`, what the stopped
                                 process printed).
    <!-- file: PATH -->          The block's content is written to PATH (relative to the
                                 session's directory at that point): "save this as PATH".
    <!-- not run: REASON -->     Says on purpose that the block is not run (installing Rust,
                                 cloning, building: the test has `WEFT_BIN`).

Rewriting, the same in commands and in expected output:
  * `cargo run --release --` becomes `weft`, and `weft` on the PATH is `$WEFT_BIN`;
  * every documented port — 11222 to 11299 (client ports) and 7800 to 7899 (cluster ports),
    standing alone as a number — becomes a free loopback port of as many digits, the same one
    everywhere on the page (so tables keep their alignment); `WEFT_BIND` and `WEFT_SERVER`
    make `weft server` and `weft cli` use the page's 11222 when no address is given;
  * `redis-cli` prints as on a terminal (`--no-raw`) where its output is the block's own (not
    in a pipe or `$(…)`), so `(integer) 1` and `"hello"` appear as the reader sees them.
    redis-cli exits 0 on an error reply: a line of a run block's output that starts with
    `(error)` fails the block unless its output block shows it.

Expected output is compared line by line, ignoring trailing whitespace and trailing blank
lines. `…` in a line matches any text within that line; a line that is only `…` matches any
number of lines, none included. Use them for what changes from run to run (times, ids,
versions), and nowhere else.
"""

from __future__ import annotations

import base64
import json
import os
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent

BLOCK_TIMEOUT_S = 120.0
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0

ANNOTATION = re.compile(r"^<!--\s*(run|output|file|stop|not run)\s*(?::\s*(.*?))?\s*-->\s*$")
FENCE = re.compile(r"^(```+|~~~+)\s*([\w+-]*)")
PORT = re.compile(r"(?<![\w.\-])(112[2-9]\d|78\d\d)(?![\w\-])")
SHELL_LANGUAGES = {"sh", "bash", "shell", "console", "zsh"}


class DocError(AssertionError):
    """A documented command failed, or printed something else than the page shows."""


@dataclass
class Block:
    line: int            # 1-based line of the opening fence
    language: str
    text: str
    kind: str | None = None        # run, output, file, stop, not run
    argument: str = ""             # what follows the colon in the annotation


@dataclass
class Annotation:
    line: int
    kind: str
    argument: str


def parse(markdown: str) -> list[Block | Annotation]:
    """The page's code blocks in order, each with the annotation right before it; `stop`
    annotations (which have no block) appear as items of their own."""
    items: list[Block | Annotation] = []
    lines = markdown.split("\n")
    pending: Annotation | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        annotation = ANNOTATION.match(line.strip())
        if annotation:
            kind, argument = annotation.group(1), annotation.group(2) or ""
            if kind == "stop":
                items.append(Annotation(i + 1, kind, argument))
            else:
                if pending is not None:
                    raise DocError(f"line {pending.line}: `{pending.kind}` annotation with no block after it")
                pending = Annotation(i + 1, kind, argument)
            i += 1
            continue
        fence = FENCE.match(line.lstrip())
        if fence:
            indent = len(line) - len(line.lstrip())
            marker = fence.group(1)
            body = []
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(marker[:3]):
                body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
                j += 1
            if j >= len(lines):
                raise DocError(f"line {i + 1}: code block never closed")
            block = Block(i + 1, fence.group(2).lower(), "\n".join(body) + "\n")
            if pending is not None:
                block.kind, block.argument = pending.kind, pending.argument
                pending = None
            items.append(block)
            i = j + 1
            continue
        if pending is not None and line.strip():
            raise DocError(f"line {pending.line}: `{pending.kind}` annotation not followed by a code block")
        i += 1
    if pending is not None:
        raise DocError(f"line {pending.line}: `{pending.kind}` annotation at the end of the page")
    return items


def options(argument: str) -> tuple[set[str], dict[str, str]]:
    """`background ready="x y" timeout=5` → ({"background"}, {"ready": "x y", "timeout": "5"})."""
    flags, values = set(), {}
    for token in shlex.split(argument):
        if "=" in token:
            name, value = token.split("=", 1)
            values[name] = value
        else:
            flags.add(token)
    return flags, values


# ---------------------------------------------------------------------------------------------
# Ports


def _port_free(port: int, udp: bool) -> bool:
    kinds = [socket.SOCK_STREAM] + ([socket.SOCK_DGRAM] if udp else [])
    for kind in kinds:
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def allocate_ports(documented: set[int], taken: set[int]) -> dict[int, int]:
    """A free loopback port for each documented one, with as many digits (4-digit cluster
    ports get a free TCP and UDP port in 2000–9999, 5-digit client ports one in 20000–32767,
    below Linux' ephemeral range), none in `taken`."""
    import random

    mapping: dict[int, int] = {}
    rng = random.Random()
    for port in sorted(documented):
        low, high = (2000, 9999) if port < 10000 else (20000, 32767)
        cluster = port < 10000
        for _ in range(500):
            candidate = rng.randint(low, high)
            if candidate in taken or candidate in mapping.values():
                continue
            if _port_free(candidate, udp=cluster):
                mapping[port] = candidate
                break
        else:
            raise RuntimeError(f"no free port found for {port}")
    return mapping


def rewrite(text: str, ports: dict[int, int]) -> str:
    text = text.replace("cargo run --release --", "weft")
    return PORT.sub(lambda m: str(ports.get(int(m.group(1)), int(m.group(1)))), text)


def documented_ports(items: list[Block | Annotation]) -> set[int]:
    found = {11222}
    for item in items:
        if isinstance(item, Block) and item.kind in ("run", "output", "file"):
            found.update(int(m.group(1)) for m in PORT.finditer(item.text))
    return found


# ---------------------------------------------------------------------------------------------
# Output matching


def _line_pattern(expected: str) -> re.Pattern:
    parts = expected.split("…")
    return re.compile("".join(re.escape(part) if k == 0 else ".*?" + re.escape(part)
                              for k, part in enumerate(parts)) + r"\Z")


def matches(expected: str, actual: str) -> bool:
    """Whether `actual` is what `expected` shows, by the rules in the module's doc."""
    def lines(text: str) -> list[str]:
        result = [line.rstrip() for line in text.split("\n")]
        while result and not result[-1]:
            result.pop()
        return result

    want, got = lines(expected), lines(actual)
    memo: dict[tuple[int, int], bool] = {}

    def match(i: int, j: int) -> bool:
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(want):
            result = j == len(got)
        elif want[i].strip() == "…":
            result = any(match(i + 1, k) for k in range(j, len(got) + 1))
        else:
            result = j < len(got) and bool(_line_pattern(want[i]).match(got[j])) and match(i + 1, j + 1)
        memo[key] = result
        return result

    return match(0, 0)


# ---------------------------------------------------------------------------------------------
# The session


@dataclass
class Background:
    command: str
    process: subprocess.Popen
    log: Path
    is_weft_server: bool
    port: int | None = None        # a weft server's client port
    node_name: str | None = None   # a clustered weft server's `--node-name`
    stopped: bool = False

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


# redis-cli formats its replies for people only on a terminal. A block's standard output
# stands for the reader's terminal: there (and only there, not in a pipe or `$(…)`) it is
# asked for the terminal's format. Builds run at the lowest priority.
PREAMBLE = """\
set -eo pipefail
__weft_docs_on_terminal() {
  local pid=$BASHPID
  [ "$(readlink "/proc/$pid/fd/1")" = "$__weft_docs_terminal" ]
}
redis-cli() {
  if __weft_docs_on_terminal; then command redis-cli --no-raw "$@"; else command redis-cli "$@"; fi
}
cargo() { nice -n 19 cargo "$@"; }
"""


@dataclass
class Session:
    """One bash process for a page, fed one block at a time; background processes beside it."""

    name: str
    directory: Path
    env: dict[str, str]
    ports: dict[int, int]
    scratch: Path
    shell: subprocess.Popen | None = None
    background: list[Background] = field(default_factory=list)
    count: int = 0
    log: list[str] = field(default_factory=list)

    def start(self) -> None:
        self.shell = subprocess.Popen(
            ["bash", "--noprofile", "--norc"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, cwd=self.directory, env=self.env, start_new_session=True)
        (self.scratch / "preamble.sh").write_text(PREAMBLE)
        self._send(f"source {shlex.quote(str(self.scratch / 'preamble.sh'))}\n")

    def _send(self, text: str) -> None:
        assert self.shell is not None and self.shell.stdin is not None
        try:
            self.shell.stdin.write(text.encode())
            self.shell.stdin.flush()
        except BrokenPipeError:
            pass

    def _await_marker(self, marker: str, timeout_s: float) -> bool:
        """Reads the shell's own output until `marker`; False if the shell exited first."""
        assert self.shell is not None and self.shell.stdout is not None
        deadline = time.monotonic() + timeout_s
        buffer = b""
        fd = self.shell.stdout.fileno()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return False
            buffer += chunk
            if marker.encode() in buffer:
                return True

    def run(self, block: Block, timeout_s: float) -> str:
        """Runs a block in the shell; returns its standard output."""
        self.count += 1
        n = self.count
        script = self.scratch / f"block{n}.sh"
        out, err = self.scratch / f"block{n}.out", self.scratch / f"block{n}.err"
        script.write_text(rewrite(block.text, self.ports))
        marker = f"__weft_docs_done_{n}__"
        self._send(f"__weft_docs_terminal={shlex.quote(str(out))}\n"
                   f"source {shlex.quote(str(script))} </dev/null >{shlex.quote(str(out))} "
                   f"2>{shlex.quote(str(err))}\n"
                   f"env -0 >{shlex.quote(str(self.scratch / 'env'))}\n"
                   f"pwd >{shlex.quote(str(self.scratch / 'pwd'))}\n"
                   f"echo {marker}\n")
        try:
            finished = self._await_marker(marker, timeout_s)
        except TimeoutError:
            self.close()
            raise DocError(self._failure(block, f"did not finish within {timeout_s:.0f} s", out, err))
        if not finished:
            status = self.shell.wait(timeout=10) if self.shell else None
            raise DocError(self._failure(block, f"failed (exit status {status})", out, err))
        stdout = out.read_text(errors="replace")
        self.log.append(f"$ block at line {block.line}\n{stdout}{err.read_text(errors='replace')}")
        return stdout

    def _failure(self, block: Block, what: str, out: Path, err: Path) -> str:
        stdout = out.read_text(errors="replace") if out.exists() else ""
        stderr = err.read_text(errors="replace") if err.exists() else ""
        return (f"{self.name}:{block.line}: the block {what}:\n{rewrite(block.text, self.ports)}"
                f"--- stdout:\n{stdout}--- stderr:\n{stderr}{self.background_report()}")

    def current_env(self) -> dict[str, str]:
        path = self.scratch / "env"
        if not path.exists():
            return dict(self.env)
        pairs = [item.split("=", 1) for item in path.read_text(errors="replace").split("\0") if "=" in item]
        return {name: value for name, value in pairs if not name.startswith("BASH_FUNC_")}

    def current_directory(self) -> Path:
        path = self.scratch / "pwd"
        return Path(path.read_text().strip()) if path.exists() else self.directory

    def start_background(self, block: Block, ready_text: str | None, skip: str | None) -> None:
        for raw in rewrite(block.text, self.ports).splitlines():
            line = raw.strip()
            if not line or line.startswith("#") or (skip and line.startswith(skip)):
                continue
            self.count += 1
            log = self.scratch / f"background{self.count}.log"
            command = re.sub(r"^redis-cli\b", "redis-cli --no-raw", line)
            words = shlex.split(command, comments=True)
            while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
                words = words[1:]
            is_weft_server = words[:2] == ["weft", "server"]
            with open(log, "wb") as sink:
                # One simple command: bash runs it in its own process (exec), so the signal
                # reaches the program itself; its process group is its own, so stopping it
                # stops nothing else.
                process = subprocess.Popen(["bash", "-c", command], stdin=subprocess.DEVNULL,
                                           stdout=sink, stderr=subprocess.STDOUT,
                                           cwd=self.current_directory(), env=self.current_env(),
                                           start_new_session=True)
            entry = Background(line, process, log, is_weft_server)
            self.background.append(entry)
            if is_weft_server:
                bind = re.search(r"--bind[ =]\S*:(\d+)", command)
                entry.port = int(bind.group(1)) if bind else self.ports[11222]
                name = re.search(r"--node-name[ =](\S+)", command)
                if "--join" in command and name:
                    entry.node_name = name.group(1)
                self._wait_port(entry, entry.port, block)
            elif ready_text is not None:
                self._wait_text(entry, ready_text, block)
            else:
                raise DocError(f"{self.name}:{block.line}: background line `{line}` is not a "
                               "`weft server`: say when it is ready with ready=\"TEXT\"")
        self.wait_for_cluster(block.line)

    def wait_for_cluster(self, line: int) -> None:
        """A reader types the next command seconds after starting or stopping a node; by then
        the nodes agree on who is in the cluster. The runner waits for that: until every
        clustered `weft server` running names exactly the running ones as the cluster's
        members (`GET /rest/v2/container/health`, with the session's WEFT_USER and
        WEFT_PASSWORD when the server asks for credentials)."""
        nodes = [b for b in self.background
                 if b.node_name and not b.stopped and b.process.poll() is None]
        if not nodes:
            return
        expected = sorted(b.node_name for b in nodes)
        env = self.current_env()
        deadline = time.monotonic() + READY_TIMEOUT_S
        views: dict[str, object] = {}
        while time.monotonic() < deadline:
            for node in nodes:
                views[node.node_name] = _cluster_view(node.port, env)
            if all(view == expected for view in views.values()):
                return
            time.sleep(0.2)
        raise DocError(f"{self.name}:{line}: the nodes did not agree within {READY_TIMEOUT_S:.0f} s "
                       f"that the cluster is {expected}; they see {views}{self.background_report()}")

    def _wait_port(self, entry: Background, port: int, block: Block) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if entry.process.poll() is not None:
                raise DocError(f"{self.name}:{block.line}: `{entry.command}` exited with "
                               f"{entry.process.returncode} before listening:\n{entry.output()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise DocError(f"{self.name}:{block.line}: `{entry.command}` did not listen on {port} "
                       f"within {READY_TIMEOUT_S:.0f} s:\n{entry.output()}")

    def _wait_text(self, entry: Background, text: str, block: Block) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if text in entry.output():
                return
            if entry.process.poll() is not None:
                break
            time.sleep(0.05)
        raise DocError(f"{self.name}:{block.line}: `{entry.command}` did not print {text!r} "
                       f"within {READY_TIMEOUT_S:.0f} s (exit status {entry.process.poll()}):\n"
                       f"{entry.output()}")

    def stop(self, text: str, line: int) -> list[Background]:
        """Stops the background processes whose command contains `text` (all for ""), newest
        first, and checks that each exited cleanly."""
        chosen = [b for b in self.background if not b.stopped and text in b.command]
        if not chosen:
            raise DocError(f"{self.name}:{line}: `stop: {text}` matches no running background process")
        for entry in reversed(chosen):
            self._stop_one(entry, line)
        if any(entry.node_name for entry in chosen):
            self.wait_for_cluster(line)
        return chosen

    def _stop_one(self, entry: Background, line: int) -> None:
        entry.stopped = True
        process = entry.process
        exited_before = process.poll() is not None
        if not exited_before:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
                raise DocError(f"{self.name}:{line}: `{entry.command}` did not stop within "
                               f"{STOP_TIMEOUT_S:.0f} s of SIGTERM:\n{entry.output()}")
        code = process.returncode
        clean = code == 0 or (not entry.is_weft_server and not exited_before and code == -signal.SIGTERM)
        if not clean or "panicked" in entry.output():
            when = "on its own" if exited_before else "after SIGTERM"
            raise DocError(f"{self.name}:{line}: `{entry.command}` exited with {code} {when}:\n"
                           f"{entry.output()}")

    def background_report(self) -> str:
        return "".join(f"\n--- background `{b.command}` (exit status {b.process.poll()}):\n"
                       f"{b.output()[-4000:]}" for b in self.background)

    def finish(self, line: int) -> None:
        """At the end of the page: no job of the shell left running, every background
        process stopped cleanly."""
        marker = "__weft_docs_jobs__"
        jobs = self.scratch / "jobs"
        self._send(f"jobs -p >{shlex.quote(str(jobs))}\necho {marker}\n")
        if not self._await_marker(marker, 30):
            raise DocError(f"{self.name}: the shell exited at the end of the page")
        left = jobs.read_text().split()
        if left:
            raise DocError(f"{self.name}: the page leaves processes it started with `&` running "
                           f"(pids {' '.join(left)}): stop them in the page")
        running = [b for b in self.background if not b.stopped]
        if running:
            self.stop("", line)

    def close(self) -> None:
        """Whatever happened: nothing this page started is left running."""
        for entry in self.background:
            if entry.process.poll() is None:
                try:
                    os.killpg(entry.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                entry.process.wait(timeout=10)
        if self.shell is not None and self.shell.poll() is None:
            try:
                os.killpg(self.shell.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.shell.wait(timeout=10)


def _cluster_view(port: int | None, env: dict[str, str]) -> object:
    """The member names a node reports, sorted; or why it could not be asked."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/rest/v2/container/health")
    if env.get("WEFT_USER") and env.get("WEFT_PASSWORD"):
        token = base64.b64encode(f"{env['WEFT_USER']}:{env['WEFT_PASSWORD']}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return sorted(json.load(response)["cluster_health"]["node_names"])
    except (OSError, ValueError, KeyError) as error:
        return f"error: {error}"


# ---------------------------------------------------------------------------------------------
# Running a page


TOOLS = ["redis-cli", "curl", "nc", "cargo", "openssl", "jq"]


def required_tools(items: list[Block | Annotation]) -> set[str]:
    needed = set()
    for item in items:
        if isinstance(item, Block) and item.kind == "run":
            for tool in TOOLS:
                if re.search(rf"(^|[\s|;&(`$]){re.escape(tool)}\b", item.text, re.M):
                    needed.add(tool)
    return needed


def check_annotated(items: list[Block | Annotation], name: str) -> None:
    """On the getting-started pages every shell block is either run or says why not."""
    for item in items:
        if isinstance(item, Block) and item.language in SHELL_LANGUAGES and item.kind is None:
            raise DocError(f"{name}:{item.line}: a shell block with neither `<!-- run -->` nor "
                           "`<!-- not run: REASON -->`")


def run_page(path: Path, workdir: Path, weft_bin: Path, extra_env: dict[str, str] | None = None,
             require_annotations: bool = False) -> list[str]:
    """Runs every annotated block of the page at `path` in a session whose directory is
    `workdir`; raises DocError at the first difference. Returns the session's log."""
    name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
    items = parse(path.read_text())
    if require_annotations:
        check_annotated(items, name)
    missing = sorted(tool for tool in required_tools(items) if shutil.which(tool) is None)
    if missing:
        raise DocError(f"{name} runs {', '.join(missing)}, not installed here "
                       "(install them; CI installs its tools in .ci/run's first step)")
    uses_weft = any(isinstance(item, Block) and item.kind == "run"
                    and re.search(r"(^|[\s|;&(])(weft|cargo run --release --)\s", item.text, re.M)
                    for item in items)
    if uses_weft and not weft_bin.exists():
        raise DocError(f"{weft_bin} missing: run `cargo build --release -p weft-server` or set WEFT_BIN")

    bin_dir = workdir.parent / f"{workdir.name}-bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "weft").unlink(missing_ok=True)
    (bin_dir / "weft").symlink_to(weft_bin.resolve())
    scratch = workdir.parent / f"{workdir.name}-scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    ports = allocate_ports(documented_ports(items), set())
    # The reader's shell, not the test's: no Weft settings or credentials leak in.
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("WEFT_") and key not in ("REDISCLI_AUTH", "CARGO_TARGET_DIR")}
    env.update({
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "WEFT_SERVER": f"http://127.0.0.1:{ports[11222]}",
        "WEFT_BIND": f"127.0.0.1:{ports[11222]}",
        "NO_COLOR": "1",
        "CARGO_TERM_COLOR": "never",
    })
    env.update(extra_env or {})
    session = Session(name, workdir, env, ports, scratch)
    last_output: str | None = None
    # A run block's Redis error replies, until its output block (if any) shows them.
    unchecked: tuple[Block, list[str]] | None = None
    try:
        session.start()
        for item in items:
            if unchecked is not None and not (isinstance(item, Block) and item.kind == "output"):
                _no_unshown_errors(name, unchecked, "")
                unchecked = None
            if isinstance(item, Annotation):  # stop
                stopped = session.stop(item.argument, item.line)
                last_output = "".join(entry.output() for entry in stopped)
                continue
            if item.kind == "run":
                flags, values = options(item.argument)
                if "background" in flags:
                    session.start_background(item, values.get("ready"), values.get("skip"))
                    last_output = None
                else:
                    last_output = session.run(item, float(values.get("timeout", BLOCK_TIMEOUT_S)))
                    unchecked = (item, [line for line in last_output.splitlines() if line.startswith("(error)")])
            elif item.kind == "output":
                if last_output is None:
                    raise DocError(f"{name}:{item.line}: an output block with no run block or stop before it")
                expected = rewrite(item.text, ports)
                if not matches(expected, last_output):
                    raise DocError(f"{name}:{item.line}: the output differs.\n--- the page shows "
                                   f"(ports rewritten):\n{expected}--- the command printed:\n{last_output}")
                if unchecked is not None:
                    _no_unshown_errors(name, unchecked, expected)
                    unchecked = None
                last_output = None
            elif item.kind == "file":
                target = session.current_directory() / item.argument.strip()
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(rewrite(item.text, ports))
        if unchecked is not None:
            _no_unshown_errors(name, unchecked, "")
        session.finish(len(items))
    finally:
        session.close()
    return session.log


def _no_unshown_errors(name: str, unchecked: tuple[Block, list[str]], expected: str) -> None:
    """redis-cli exits 0 on an error reply: one the page does not show fails the page."""
    block, errors = unchecked
    shown = {line.strip() for line in expected.splitlines()}
    unshown = [error for error in errors if error.strip() not in shown]
    if unshown:
        raise DocError(f"{name}:{block.line}: redis-cli got an error reply the page does not "
                       f"show: {unshown[0]}")
